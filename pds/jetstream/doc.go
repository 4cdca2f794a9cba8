// Package jetstream serves fakepds's own repos as a Jetstream: the JSON
// /subscribe WebSocket protocol (v1) that apps consume instead of the CBOR
// firehose, as bluesky-social/jetstream serves it, and beside it the v2
// stream network.bsky.jetstream.subscribeEvents (V2) that Jetstream's
// current Go client reads, from the same walk of the log.
//
// It reads the sequencer, like the firehose: each subscriber walks the
// stored #commit, #identity and #account frames after its starting point,
// woken by each append, and turns them into Jetstream events (one per
// commit op, the record rendered to JSON from the commit's CAR blocks by
// the atproto data model). Replay and live are one walk, so there is no gap
// and no duplicate between them, and nothing is queued per subscriber: a
// live subscriber that falls more than Options.MaxBacklog events behind
// (checked before each frame) is cut off after the frames already sent,
// with v2's ConsumerTooSlow error frame and a close 1008, and one whose
// socket takes nothing for Options.WriteTimeout is let go. Its socket's
// send buffer is bounded (Options.SendBuffer), so a slow reader's writes
// wake as it reads, and a stalled one holds little in the kernel.
//
// # Times and cursors
//
// Jetstream stamps each event with time_us, its own clock's time in
// microseconds, and v1 consumers resume with ?cursor=<time_us>. Here
// time_us is the event's sequenced time (milliseconds, as the sequencer
// stores it) times 1000, plus the op's place among the ops sequenced in the
// same millisecond (at most 999), so it only grows along the stream and is
// a pure function of the event log: the same after a restart. A time cursor
// replays from the first op whose time_us is at least the cursor. Each
// event also carries cursor, as today's Jetstream sends it: seq*1000 + the
// op's index in its commit; a ?cursor= below 1e15 is read as one of those,
// inclusively, as Jetstream reads its seq cursors.
//
// # Compression
//
// compress=true (or a Socket-Encoding: zstd header) sends each event as a
// binary frame compressed with zstd and Jetstream's own dictionary, taken
// from Jetstream's Go module (MIT licensed; nothing of it is copied here),
// so Jetstream's client decodes it as it decodes Jetstream's. v2 names the
// same dictionary by its ID (zstdDictionary=, getZstdDictionary).
package jetstream
