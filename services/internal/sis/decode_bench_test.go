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
