//go:build !linux

package handler

import (
	"context"
	"syscall"
)

// StartReaper does nothing off Linux: there is no child subreaper.
func StartReaper(context.Context) error { return nil }

// handlerAttr starts a handler in a process group of its own, so that
// stopGroup signals everything it spawns.
func handlerAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
