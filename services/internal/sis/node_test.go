package sis

import (
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
