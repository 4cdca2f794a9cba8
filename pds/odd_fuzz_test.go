package pds_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

var oddReference = flag.Bool("odd-reference", false,
	"TestOddCases: send every case to the npm reference PDS too (scripts/reference-pds/install.sh must have run)")

// oddInputs are, for each of oddCases, an input the reference PDS answers
// with a 500 (after setup calls that must succeed). TestOddCases holds
// fakepds to the same answer, and with -odd-reference checks the
// reference still gives it.
var oddInputs = []struct {
	name  string
	setup func(p *fuzzPDS) []fuzzCall
	call  func(t testing.TB, p *fuzzPDS) fuzzCall
}{
	{name: "a record the reference's data model cannot hold", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return p.aliceCall("com.atproto.repo.createRecord", `{"repo":"$alice","collection":"app.bsky.feed.post","record":{"$type":"app.bsky.feed.post","text":"n","createdAt":"2026-11-30T12:00:00.000Z","n":9007199254740992}}`)
	}},
	{name: "a create of a record that exists", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return p.aliceCall("com.atproto.repo.createRecord", `{"repo":"$alice","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2a","record":`+seedPost+`}`)
	}},
	{name: "a create of a record that exists", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		w := `{"$type":"com.atproto.repo.applyWrites#create","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2d","value":` + seedPost + `}`
		return p.aliceCall("com.atproto.repo.applyWrites", `{"repo":"$alice","writes":[`+w+`,`+w+`]}`)
	}},
	{name: "an applyWrites update of a missing record", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return p.aliceCall("com.atproto.repo.applyWrites", `{"repo":"$alice","writes":[{"$type":"com.atproto.repo.applyWrites#update","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2y","value":`+seedPost+`}]}`)
	}},
	{name: "an applyWrites delete of a missing record", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return p.aliceCall("com.atproto.repo.applyWrites", `{"repo":"$alice","writes":[{"$type":"com.atproto.repo.applyWrites#delete","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2z"}]}`)
	}},
	{name: "admin.updateAccountEmail to an address another account holds", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return fuzzCall{NSID: "com.atproto.admin.updateAccountEmail", Auth: p.admin, Body: `{"account":"alice.test","email":"bob@example.com"}`}
	}},
	{name: "createAppPassword with a name in use",
		setup: func(p *fuzzPDS) []fuzzCall {
			return []fuzzCall{p.aliceCall("com.atproto.server.createAppPassword", `{"name":"twice"}`)}
		},
		call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
			return p.aliceCall("com.atproto.server.createAppPassword", `{"name":"twice"}`)
		}},
	{name: "an admin subject in a repo this PDS does not hold", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return fuzzCall{NSID: "com.atproto.admin.updateSubjectStatus", Auth: p.admin,
			Body: `{"subject":{"$type":"com.atproto.repo.strongRef","uri":"at://alice.test/app.bsky.feed.post/3l4b6g6qbvs2a","cid":"` + seedCID + `"},"takedown":{"applied":true}}`}
	}},
	{name: "an admin subject in a repo this PDS does not hold", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return fuzzCall{NSID: "com.atproto.admin.updateSubjectStatus", Auth: p.admin,
			Body: `{"subject":{"$type":"com.atproto.admin.defs#repoBlobRef","did":"did:plc:aaaaaaaaaaaaaaaaaaaaaaaa","cid":"` + seedCID + `"},"takedown":{"applied":true}}`}
	}},
	{name: "an admin subject in a repo this PDS does not hold", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return fuzzCall{NSID: "com.atproto.admin.getSubjectStatus", Auth: p.admin, Query: "uri=at://alice.test/app.bsky.feed.post/3l4b6g6qbvs2a"}
	}},
	{name: "a service JWT whose header or payload is not JSON, on an admin method", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return fuzzCall{NSID: "com.atproto.admin.getAccountInfo", Auth: "Bearer abc.def.ghi", Query: "did=" + p.alice.DID}
	}},
	{name: "a service JWT whose header or payload is not JSON, on an admin method", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return fuzzCall{NSID: "com.atproto.admin.getAccountInfo", Auth: "Bearer eyJhbGciOiJFUzI1NksifQ.bm90anNvbg.sig", Query: "did=" + p.alice.DID}
	}},
	{name: "an importRepo CAR that does not read as a repo", call: func(_ testing.TB, p *fuzzPDS) fuzzCall {
		return fuzzCall{NSID: "com.atproto.repo.importRepo", Auth: "Bearer " + p.alice.Access, ContentType: "application/vnd.ipld.car", Body: "not a CAR"}
	}},
	{name: "an importRepo CAR that does not read as a repo", call: func(t testing.TB, p *fuzzPDS) fuzzCall {
		car := p.mustCall(t, fuzzCall{NSID: "com.atproto.sync.getRepo", Query: "did=" + p.alice.DID}).Body
		return fuzzCall{NSID: "com.atproto.repo.importRepo", Auth: "Bearer " + p.alice.Access, ContentType: "application/vnd.ipld.car", Body: string(car[:len(car)-1])}
	}},
}

func (p *fuzzPDS) aliceCall(nsid, body string) fuzzCall {
	return fuzzCall{NSID: nsid, Auth: "Bearer " + p.alice.Access, Body: p.expand(body)}
}

// TestOddCases: each input of oddInputs answers 500 InternalServerError,
// is the odd case it is listed as (so the fuzz targets accept that 500 and
// no other), and changes nothing stored. With -odd-reference, the npm
// reference PDS answers each with a 500 too, also changing nothing.
func TestOddCases(t *testing.T) {
	for _, c := range oddCases {
		if !strings.Contains(docsKnownDifferences(t), c.name) {
			t.Errorf("docs/known-differences.md does not list %q", c.name)
		}
	}
	backends := []struct {
		name string
		new  func(t *testing.T) *fuzzPDS
	}{{"fakepds", func(t *testing.T) *fuzzPDS { return newFuzzPDS(t) }}}
	if *oddReference {
		backends = append(backends, struct {
			name string
			new  func(t *testing.T) *fuzzPDS
		}{"reference", func(t *testing.T) *fuzzPDS {
			p := &fuzzPDS{logs: &errorLog{}, remote: startReference(t, t.Cleanup)}
			p.open(t)
			return p
		}})
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			p := b.new(t)
			for _, in := range oddInputs {
				if in.setup != nil {
					for _, c := range in.setup(p) {
						p.mustCall(t, c)
					}
				}
				c := in.call(t, p)
				before := p.state(t)
				p.logs.reset()
				r, _ := p.do(t, c)
				var e struct{ Error string }
				_ = json.Unmarshal(r.Body, &e)
				if r.Status != 500 || e.Error != "InternalServerError" {
					t.Errorf("%s (%s): %d %s, want 500 InternalServerError", in.name, c, r.Status, r.Body)
					continue
				}
				if p.remote == nil {
					if got := p.matchedOdd(t, c); got != in.name {
						t.Errorf("%s: taken as %q, want %q", c, got, in.name)
					}
				}
				if after := p.state(t); after != before {
					t.Errorf("%s changed stored data:\nbefore:\n%s\nafter:\n%s", c, before, after)
				}
			}
		})
	}
}

func docsKnownDifferences(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/known-differences.md")
	if err != nil {
		t.Fatal(err)
	}
	_, odd, _ := strings.Cut(string(b), "## Matched although odd")
	odd, _, _ = strings.Cut(odd, "\n## ")
	return odd
}

// refPDS is the npm reference PDS, started by scripts/reference-pds.
type refPDS struct {
	URL           string `json:"url"`
	AdminPassword string `json:"adminPassword"`
	client        *http.Client
	stdin         io.Closer // held: its finalizer would close it, and the reference stops on EOF
}

// startReference starts the reference and registers its stop with
// cleanup; it also stops when this process ends (its stdin closes).
func startReference(t testing.TB, cleanup func(func())) *refPDS {
	t.Helper()
	cmd := exec.Command("../scripts/reference-pds/run.sh")
	stdin, err := cmd.StdinPipe() // it stops when stdin closes
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var ref refPDS
	select {
	case l := <-line:
		if err := json.Unmarshal([]byte(l), &ref); err != nil {
			t.Fatalf("reference PDS: %q: %v\n%s", l, err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("reference PDS not ready after 60s:\n%s", stderr.String())
	}
	ref.client, ref.stdin = &http.Client{Timeout: callTimeout}, stdin
	return &ref
}

// serve sends a request made for the in-process handler to the reference.
func (r *refPDS) serve(tb testing.TB, what string, req *http.Request) fuzzReply {
	tb.Helper()
	u, err := url.Parse(r.URL)
	if err != nil {
		tb.Fatal(err)
	}
	req.URL.Scheme, req.URL.Host, req.Host = u.Scheme, u.Host, ""
	req.RequestURI = ""
	resp, err := r.client.Do(req)
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	return fuzzReply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
