package store

// QueriesPrepared is the texts of db's statements prepared for Query,
// oldest first.
func QueriesPrepared(db *DB) []string {
	db.queries.mu.Lock()
	defer db.queries.mu.Unlock()
	return append([]string(nil), db.queries.order...)
}
