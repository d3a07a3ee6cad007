package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"msgexchange/libs/testutil/pgtest"
	"msgexchange/migrations"
	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
	"msgexchange/services/processor/internal/sistest"
)

// refDocV1 is the document contract version 1 wrote (until migration
// 00012): the element mapping of a flight document with blank values null
// and empty members of repeated elements dropped. It is kept here, frozen,
// to produce the rows the migration must rewrite.
func refDocV1(n *sis.Node) any { return nullEmpty(flight.NodeValue(n)) }

// TestReference_R_C10_MigrationRewritesVersion1Documents: migration 00012
// rewrites every stored version-1 document into exactly the document the
// processor now writes for the same record — for every record of every
// reference sample — moves what fits no shape under VERBATIM, and stamps
// the contract version on the table.
func TestReference_R_C10_MigrationRewritesVersion1Documents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	p, db, err := migrations.Provider(url)
	require.NoError(t, err)
	defer db.Close()
	_, err = p.UpTo(ctx, 11)
	require.NoError(t, err)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()

	type row struct{ typ, key string }
	want := map[row]map[string]any{}
	insert := func(typ, key string, v1 any) {
		b, err := json.Marshal(v1)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO ref_data (type, key, doc, last_msg_id) VALUES ($1, $2, $3, 1)
			ON CONFLICT (type, key) DO UPDATE SET doc = EXCLUDED.doc`, typ, key, b)
		require.NoError(t, err)
	}
	for _, path := range sistest.ReferenceSamples(t, sampleDir) {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		msg, err := sis.Decode(raw)
		require.NoError(t, err, path)
		typ := msg.Meta.TYPE
		for _, n := range msg.Root.ChildrenNamed(typ) {
			key := n.Child(refKeys[typ]).Value()
			v2, err := refDoc(typ, key, n)
			require.NoError(t, err, "%s %s", path, key)
			insert(typ, key, refDocV1(n))
			want[row{typ, key}] = v2
		}
	}
	require.Greater(t, len(want), 40)
	// Version-1 rows no version-2 record can produce: kept under VERBATIM.
	insert("ABDG", "ODD", map[string]any{"ABCD": "ODD", "DESC": []any{"a", "b"}, "STND": map[string]any{"@X": "1", "#text": "5"}, "VERBATIM": "v"})
	insert("AIRL", "ODD", map[string]any{"ITOP": "ODD", "TRML": "T1", "SUBC": map[string]any{"CODE": "C", "X": "y"}, "OGRP": nil})

	_, err = p.Up(ctx)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `SELECT type, key, doc FROM ref_data`)
	require.NoError(t, err)
	got := map[row]map[string]any{}
	for rows.Next() {
		var r row
		var doc []byte
		require.NoError(t, rows.Scan(&r.typ, &r.key, &doc))
		var m map[string]any
		require.NoError(t, json.Unmarshal(doc, &m))
		got[r] = m
	}
	require.NoError(t, rows.Err())
	for r, w := range want {
		require.Equal(t, w, got[r], "%s %s", r.typ, r.key)
		sistest.CheckShape(t, r.typ, got[r])
	}
	require.Equal(t, map[string]any{
		"ABCD":     "ODD",
		"VERBATIM": map[string]any{"DESC": []any{"a", "b"}, "STND": []any{map[string]any{"@X": "1", "#text": "5"}}, "VERBATIM": []any{"v"}},
	}, got[row{"ABDG", "ODD"}])
	require.Equal(t, map[string]any{
		"ITOP": "ODD", "TRML": []any{map[string]any{"@MVIN": nil, "@FLIN": nil, "#text": "T1"}}, "OGRP": nil,
		"VERBATIM": map[string]any{"SUBC": []any{map[string]any{"CODE": "C", "X": "y"}}},
	}, got[row{"AIRL", "ODD"}])

	var comment string
	require.NoError(t, pool.QueryRow(ctx, `SELECT obj_description('ref_data'::regclass, 'pg_class')`).Scan(&comment))
	require.Contains(t, comment, fmt.Sprintf("contract version %d", RefDataContractVersion))
}
