package sis

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDecodeCorpus decodes every corpus message, read in place.
func BenchmarkDecodeCorpus(b *testing.B) {
	if _, err := os.Stat(filepath.Join(corpusPath, "index.tsv")); err != nil {
		b.Skipf("corpus %s is missing: %v", corpusPath, err)
	}
	benchmarkDecode(b, xmlFiles(b, corpusPath))
}

// BenchmarkDecodeGolden decodes every sample message of testdata/sis.
func BenchmarkDecodeGolden(b *testing.B) {
	benchmarkDecode(b, goldenInputs(b))
}

func benchmarkDecode(b *testing.B, files []string) {
	raws := make([][]byte, 0, len(files))
	total := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		raws = append(raws, raw)
		total += len(raw)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, raw := range raws {
			if _, err := Decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecodeHostile decodes each hostile 10 MiB shape of R-H2 and the
// largest realistic message (a 10 MiB daily snapshot); docs/reliability.md
// quotes its figures. Run it with
//
//	go test -run '^$' -bench DecodeHostile -benchtime 5x ./services/internal/sis/
func BenchmarkDecodeHostile(b *testing.B) {
	for _, tc := range hostileCases() {
		b.Run(tc.name, func(b *testing.B) {
			raw := tc.input()
			text := string(raw)
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if tc.raw {
					_, _ = Decode(raw)
				} else {
					_, _ = DecodeText(text)
				}
			}
		})
	}
	b.Run("RealisticSnapshot", func(b *testing.B) {
		text := snapshot(b, snapshotFlightsUnder(b, DefaultMaxBytes))
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeText(text); err != nil {
				b.Fatal(err)
			}
		}
	})
}
