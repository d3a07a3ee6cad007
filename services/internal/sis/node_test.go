package sis

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNodeAccessors(t *testing.T) {
	t.Parallel()
	m, err := Decode([]byte(msg(metaWith("AIRL", "DNLD"),
		`<RECS>1</RECS><AIRL><ITOP> CA </ITOP><TRML MVIN="A" FLIN="">T2</TRML><TRML MVIN="D">T3</TRML><OGRP/></AIRL>`)))
	require.NoError(t, err)
	airl := m.Root.Child("AIRL")
	require.NotNil(t, airl)
	require.Equal(t, " CA ", airl.Child("ITOP").Text)
	require.Equal(t, "CA", airl.Child("ITOP").Value())
	trml := airl.ChildrenNamed("TRML")
	require.Len(t, trml, 2)
	require.Equal(t, "T3", trml[1].Value())
	v, ok := trml[0].AttrValue("FLIN")
	require.True(t, ok)
	require.Empty(t, v)
	_, ok = trml[1].AttrValue("FLIN")
	require.False(t, ok)
	require.True(t, airl.Has("OGRP"))
	require.True(t, airl.Child("OGRP").Empty)
	require.False(t, airl.Has("SUBC"))
	require.Nil(t, airl.ChildrenNamed("SUBC"))

	require.True(t, airl.Child("OGRP").Blank())
	require.False(t, airl.Child("ITOP").Blank())
	require.False(t, airl.Blank(), "an element with children is not blank")

	body := m.Body()
	require.Len(t, body, 2)
	require.Equal(t, "RECS", body[0].Name)
	require.Equal(t, "AIRL", body[1].Name)
}

func TestNodeAccessorsAreNilSafe(t *testing.T) {
	t.Parallel()
	var n *Node
	require.Nil(t, n.Child("X"))
	require.Nil(t, n.Child("X").Child("Y"), "chains stop at the first absent element")
	require.Nil(t, n.ChildrenNamed("X"))
	require.False(t, n.Has("X"))
	require.Empty(t, n.Value())
	require.False(t, n.Blank(), "absent is not blank")
	_, ok := n.AttrValue("X")
	require.False(t, ok)
	var m *Message
	require.Nil(t, m.Body())
	require.Nil(t, (&Message{}).Body())
}

// TestNode_R_J4_TakeEach: the children of the name are taken out in
// input order, the others stay in theirs, and an error from fn stops the
// walk with every child of the name gone all the same.
func TestNode_R_J4_TakeEach(t *testing.T) {
	t.Parallel()
	m, err := Decode([]byte(msg(metaWith("SCHD", "DNLD"),
		`<SCHD><RECS>3</RECS><FLTR><FLID>1</FLID></FLTR><STDB>x</STDB><FLTR><FLID>2</FLID></FLTR><FLTR><FLID>3</FLID></FLTR></SCHD>`)))
	require.NoError(t, err)
	schd := m.Root.Child("SCHD")
	require.Equal(t, 3, schd.Count("FLTR"))
	var seen []string
	require.NoError(t, schd.TakeEach("FLTR", func(n *Node) error {
		seen = append(seen, n.Child("FLID").Value())
		require.Zero(t, schd.Count("FLTR"), "taken before the first call")
		return nil
	}))
	require.Equal(t, []string{"1", "2", "3"}, seen)
	require.Len(t, schd.Children, 2)
	require.Equal(t, "RECS", schd.Children[0].Name)
	require.Equal(t, "STDB", schd.Children[1].Name)

	m, err = Decode([]byte(msg(metaWith("SCHD", "DNLD"), `<SCHD><FLTR><FLID>1</FLID></FLTR><FLTR><FLID>2</FLID></FLTR></SCHD>`)))
	require.NoError(t, err)
	schd = m.Root.Child("SCHD")
	calls := 0
	require.EqualError(t, schd.TakeEach("FLTR", func(*Node) error { calls++; return errors.New("bad record") }), "bad record")
	require.Equal(t, 1, calls)
	require.Nil(t, schd.Children, "no child of the name is left, and none of another")
	require.Zero(t, (*Node)(nil).Count("FLTR"))
	require.NoError(t, (*Node)(nil).TakeEach("FLTR", func(*Node) error { return errors.New("never called") }))
}
