package handler

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const prSetChildSubreaper = 36 // linux/prctl.h

// StartReaper makes this process a child subreaper and reaps the orphans it
// then inherits, until ctx is done. An exec handler's background children
// outlive the handler's shell; without this they are reparented to PID 1,
// which in a container (taskd as PID 1, no init) never reaps them: killed
// ones stay zombies in their process group, so a killed group never looks
// empty and each kill waits out its whole grace. Direct children (the
// group leaders Exec starts) are left to their cmd.Wait.
func StartReaper(ctx context.Context) error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("become child subreaper: %w", errno)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	go func() {
		defer signal.Stop(sig)
		// SIGCHLD may coalesce: also sweep now and then.
		t := time.NewTicker(time.Second)
		defer t.Stop()
		// The kernel gives an orphan to the subreaper's first live thread,
		// the main thread, which Go never ends: on SIGCHLD that thread's
		// children are enough (an exec handler's leaders started from the
		// other threads are their Handle's to wait for); the sweep reads
		// every thread's.
		mainThread := strconv.Itoa(os.Getpid())
		for {
			threads := mainThread
			select {
			case <-ctx.Done():
				return
			case <-sig:
			case <-t.C:
				threads = "*"
			}
			reapOrphans(threads)
		}
	}()
	return nil
}

// reapOrphans reaps zombie children of this process's threads (a thread
// ID or "*" for all) that are not group leaders.
func reapOrphans(threads string) {
	for _, p := range children(threads) {
		if p.state == "Z" && p.pid != p.pgrp {
			_, _ = syscall.Wait4(p.pid, nil, syscall.WNOHANG, nil)
		}
	}
}

type proc struct {
	pid, ppid, pgrp int
	state           string
}

// children lists the children of this process's threads (a thread ID or
// "*") from their children files (an exec handler's leaders and the
// orphans reparented here), a few reads however many processes the host
// runs; without those files (CONFIG_PROC_CHILDREN), every child, from
// every process in /proc.
func children(threads string) []proc {
	files, _ := filepath.Glob("/proc/self/task/" + threads + "/children")
	if len(files) == 0 {
		self := os.Getpid()
		var ps []proc
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if p, ok := readProc(e.Name()); ok && p.ppid == self {
				ps = append(ps, p)
			}
		}
		return ps
	}
	var ps []proc
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, pid := range strings.Fields(string(b)) {
			if p, ok := readProc(pid); ok {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// readProc reads /proc/PID/stat; false for a name that is no process (or
// one that is gone).
func readProc(name string) (proc, bool) {
	pid, err := strconv.Atoi(name)
	if err != nil {
		return proc{}, false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", name, "stat"))
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid pgrp ...; comm may contain spaces and ')'.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 3 {
		return proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return proc{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0]}, true
}

// GroupAttr starts a child (a handler, the command of `taskd lock`) in a
// process group of its own (so that stopGroup signals everything it
// spawns) that the kernel kills when taskd dies: a kill -9 of the node then
// leaves no handler running on, sharing the capacity the kill gives back
// (a lease, a serial group's turn, a lock) with the attempt recovery starts
// elsewhere. Only the child gets the signal: the rest of a handler's group
// is the handler guard's to kill (guard_linux.go). The signal follows the thread
// that started the child, and Go ends a thread only when a goroutine
// locked to it exits, which taskd never does.
func GroupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
