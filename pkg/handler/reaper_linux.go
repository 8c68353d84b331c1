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
		for {
			select {
			case <-ctx.Done():
				return
			case <-sig:
			case <-t.C:
			}
			reapOrphans()
		}
	}()
	return nil
}

// reapOrphans reaps zombie children of this process that are not group
// leaders.
func reapOrphans() {
	self := os.Getpid()
	for _, p := range procs() {
		if p.state == "Z" && p.ppid == self && p.pid != p.pgrp {
			_, _ = syscall.Wait4(p.pid, nil, syscall.WNOHANG, nil)
		}
	}
}

type proc struct {
	pid, ppid, pgrp int
	state           string
}

// procs lists the processes in /proc.
func procs() []proc {
	var ps []proc
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		ps = append(ps, proc{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0]})
	}
	return ps
}
