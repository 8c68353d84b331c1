// Package phpclient carries the PHP client's sources in Go programs:
// `taskd bench` writes them to a temporary directory to run real PHP pool
// and exec handlers.
package phpclient

import "embed"

// FS holds src/ and examples/worker.php.
//
//go:embed src examples/worker.php
var FS embed.FS
