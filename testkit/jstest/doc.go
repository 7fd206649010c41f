// Package jstest is a test helper for the JetStream store and its users: an
// embedded, file-backed JetStream server on a temporary directory, as serve
// --data-dir runs one, with a store on it (Start); and a JetStream cluster of
// several nats-servers in the test process, routed to each other on loopback, as
// serve --nats-url --replicas N runs against (StartCluster).
package jstest
