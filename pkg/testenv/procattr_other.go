//go:build !linux

package testenv

import "os/exec"

// DieWithTest does nothing where the kernel cannot tie a child's life to
// its parent's; the test's cleanups still stop it.
func DieWithTest(*exec.Cmd) {}
