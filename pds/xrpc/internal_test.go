package xrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
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

// encodingJSON is how WriteJSON's encoder quotes s.
func encodingJSON(t testing.TB, s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// TestAppendString: AppendString quotes as encoding/json does, for every
// string of one and two bytes and the runes it treats apart.
func TestAppendString(t *testing.T) {
	t.Parallel()
	check := func(s string) {
		if got, want := string(AppendString([]byte("x"), s)), "x"+encodingJSON(t, s); got != want {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
	for a := range 256 {
		check(string([]byte{byte(a)}))
		for b := range 256 {
			check(string([]byte{byte(a), byte(b)}))
		}
	}
	for _, s := range []string{"", "plain", "\u2028\u2029\u2027\u202a", "é🦋\ufffd", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x80", "a\xe2\x80\xa8b\"c\\d\x7f<>&", "\xf0\x9f\xa6"} {
		check(s)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"a\u2028\"\\\x00", "\xff\xfe", "🦋"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(AppendString(nil, s)), encodingJSON(t, s); got != want {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// TestWriteError: the hand-written envelope is what WriteJSON made of it.
func TestWriteError(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		InvalidRequest("", "Expected string value type (got 5) at $.repo"),
		InvalidRequest("InvalidSwap", "Record was at <a&b> \"q\" \u2028 \x01 \xff"),
		AuthRequired("", ""),
		&Error{Status: 413, Name: "PayloadTooLargeError", Message: "request entity too large"},
		errors.New("not an *Error"),
		&Error{Status: 400, Name: "Na\"me\n", Message: "é"},
	} {
		want := httptest.NewRecorder()
		e := asError(err)
		WriteJSON(want, e.Status, struct {
			Error   string `json:"error"`
			Message string `json:"message,omitempty"`
		}{e.Name, e.Message})
		got := httptest.NewRecorder()
		WriteError(got, err)
		if got.Code != want.Code || got.Body.String() != want.Body.String() || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Errorf("WriteError(%v) = %d %s, want %d %s", err, got.Code, got.Body, want.Code, want.Body)
		}
	}
}
