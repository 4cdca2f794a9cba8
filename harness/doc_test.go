package harness_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every Go block of docs/harness.md compiles and runs in a fresh module
// that uses the harness as the page's first step says (a replace to this
// checkout). A block that is a whole file is used as is, in a
// package of its own; one that starts with func or type is a file's
// declarations; any other is the body of a test. The last two share one
// package (one binary to link) with a TestMain, unless a block brings its
// own TestMain: then it gets a package of its own.
func TestDocsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own (-short)")
	}
	t.Parallel()
	doc, err := os.ReadFile("../docs/harness.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 10 {
		t.Fatalf("%d Go blocks in docs/harness.md", len(blocks))
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/mything\n\ngo 1.26.0\n\nrequire github.com/fakepds/fakepds v0.0.0\n\nreplace github.com/fakepds/fakepds => "+root+"\n")
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	write("blocks/main_test.go", "package doc_test\n\nimport (\n\t\"testing\"\n\n\t\"github.com/fakepds/fakepds/harness\"\n)\n\nfunc TestMain(m *testing.M) { harness.Main(m) }\n")
	for i, b := range blocks {
		code := b[1]
		pkg := "blocks"
		if strings.Contains(code, "func TestMain(") {
			pkg = fmt.Sprintf("block%02d", i)
		}
		name := fmt.Sprintf("%s/block%02d_test.go", pkg, i)
		switch {
		case strings.HasPrefix(code, "package "):
			write(fmt.Sprintf("block%02d/doc_test.go", i), code)
		case strings.HasPrefix(code, "func ") || strings.HasPrefix(code, "type ") || strings.HasPrefix(code, "//"):
			write(name, docPrelude+code)
		default:
			write(name, docPrelude+fmt.Sprintf("func TestBlock%02d(t *testing.T) {\n%s}\n", i, code))
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "./...")
	cmd.Dir = dir
	// The module proxy stays as the caller has it: resolving the fresh
	// module's graph reads go.mod files (of dependencies' dependencies) that
	// building the checkout never needed, so a new machine's cache lacks them.
	cmd.Env = append(slicesWithout(os.Environ(), "HARNESS_PDS_", "GOFLAGS=", "GOWORK="),
		"GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the blocks of docs/harness.md in a fresh module (%s): %v\n%s", dir, err, out)
	}
}

// docPrelude is what a block that is not a whole file is given: the
// imports the page's blocks use, each kept used.
const docPrelude = `package doc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/api/bsky"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/fixtures"
	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/pds"
)

var (
	_ = context.Background
	_ = errors.New
	_ = fmt.Sprint
	_ = log.Fatal
	_ time.Duration
	_ = comatproto.ServerGetSession
	_ bsky.FeedPost
	_ = atclient.NewAPIClient
	_ = oauth.NewMemStore
	_ syntax.DID
	_ = fixtures.Social
	_ = harness.New
	_ pds.Config
)

`

// slicesWithout is environ without the variables whose name starts with
// one of prefixes.
func slicesWithout(environ []string, prefixes ...string) []string {
	var out []string
next:
	for _, kv := range environ {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}
