package xrpc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAll: readAll reads what io.ReadAll(io.LimitReader(r, n)) reads,
// with the same error, whatever its size hint.
func TestReadAll(t *testing.T) {
	t.Parallel()
	errBody := errors.New("body failed")
	for _, size := range []int{0, 1, 511, 512, 513, 1000, 5000} {
		data := strings.Repeat("x", size)
		for _, n := range []int64{1, 2, 512, 513, 999, 1000, 1001, 100000} {
			for _, hint := range []int64{-1, 0, 1, int64(size) - 1, int64(size), int64(size) + 1, n - 1, n} {
				readers := map[string]func() io.Reader{
					"plain":   func() io.Reader { return strings.NewReader(data) },
					"onebyte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(data)) },
					"dataerr": func() io.Reader { return iotest.DataErrReader(strings.NewReader(data)) },
					"failing": func() io.Reader { return io.MultiReader(strings.NewReader(data), iotest.ErrReader(errBody)) },
				}
				for name, r := range readers {
					want, wantErr := io.ReadAll(io.LimitReader(r(), n))
					got, err := readAll(r(), hint, n)
					if !bytes.Equal(got, want) || !errors.Is(err, wantErr) && err != wantErr {
						t.Fatalf("size %d, n %d, hint %d, %s: %d bytes, %v; want %d bytes, %v", size, n, hint, name, len(got), err, len(want), wantErr)
					}
				}
			}
		}
	}
}
