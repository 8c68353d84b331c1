//go:build !linux

package handler

import (
	"context"
	"syscall"
)

// StartReaper does nothing off Linux: there is no child subreaper.
func StartReaper(context.Context) error { return nil }

// GroupAttr starts a child (a handler, the command of `taskd lock`) in a
// process group of its own, so that stopGroup signals everything it spawns.
func GroupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
