package conformance

// scenarios is every scenario, in report order. Each is written once and
// runs on every backend; its steps must not depend on which backend runs
// it (no branching on answers), so that transcripts line up.
var scenarios = []scenario{
	{name: "server-describe", run: serverDescribe},
	{name: "account-create", run: accountCreate},
	{name: "session", run: session},
	{name: "app-passwords", run: appPasswords},
	{name: "account-lifecycle", run: accountLifecycle},
	{name: "email-requests", run: emailRequests},
	{name: "repo-create-get", run: repoCreateGet},
	{name: "repo-put-delete", run: repoPutDelete},
	{name: "repo-apply-writes", run: repoApplyWrites},
	{name: "repo-list-describe", run: repoListDescribe},
	{name: "repo-import", run: repoImport},
	{name: "preferences", run: preferences},
	{name: "blobs", run: blobs},
	{name: "sync", run: syncEndpoints},
	{name: "identity", run: identity},
	{name: "handle-reserved", run: handleReserved},
	{name: "handle-case", run: handleCase},
	{name: "admin-takedown", run: adminTakedown},
	{name: "admin-accounts", run: adminAccounts},
	{name: "firehose-account-creation", run: firehoseAccountCreation},
	{name: "firehose-commits", run: firehoseCommits},
	{name: "firehose-empty-commit", run: firehoseEmptyCommit},
	{name: "firehose-replay", run: firehoseReplay},
	{name: "xrpc", run: xrpcMisc},
	{name: "oauth", run: oauthFlow},
	{name: "oauth-sign-in", run: oauthSignIn},
}
