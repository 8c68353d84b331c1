package sshserve

import (
	"sort"
	"sync"

	"charm.land/ssh"
	gossh "golang.org/x/crypto/ssh"
)

// What the server refuses besides commands (see refuse): each refusal is
// answered at the protocol level, and the session's terminal is told.

// notesKey holds the connection's refused requests (*refusals).
type notesKey struct{}

type refusals struct {
	mu    sync.Mutex
	names map[string]bool
}

// note records a refused request on the connection.
func note(ctx ssh.Context, what string) {
	r, _ := ctx.Value(notesKey{}).(*refusals)
	if r == nil {
		r = &refusals{names: map[string]bool{}}
		ctx.SetValue(notesKey{}, r)
	}
	r.mu.Lock()
	r.names[what] = true
	r.mu.Unlock()
}

// refusedNotes lists what the connection was refused so far.
func refusedNotes(ctx ssh.Context) []string {
	r, _ := ctx.Value(notesKey{}).(*refusals)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.names))
	for n := range r.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// sessionRefused are session requests answered no, by what they ask.
var sessionRefused = map[string]string{
	"auth-agent-req@openssh.com": "agent forwarding",
	"x11-req":                    "X11 forwarding",
}

// sessionChannel is the session channel handler, answering no to agent
// and X11 forwarding before the session sees them (the library would
// answer yes and never use them).
func (s *Server) sessionChannel(srv *ssh.Server, conn *gossh.ServerConn, newChan gossh.NewChannel, ctx ssh.Context) {
	ssh.DefaultSessionHandler(srv, conn, filteredChannel{NewChannel: newChan, ctx: ctx}, ctx)
}

type filteredChannel struct {
	gossh.NewChannel
	ctx ssh.Context
}

func (c filteredChannel) Accept() (gossh.Channel, <-chan *gossh.Request, error) {
	ch, reqs, err := c.NewChannel.Accept()
	if err != nil {
		return ch, reqs, err
	}
	out := make(chan *gossh.Request)
	go func() {
		defer close(out)
		for req := range reqs {
			if what, refused := sessionRefused[req.Type]; refused {
				note(c.ctx, what)
				if req.WantReply {
					_ = req.Reply(false, nil)
				}
				continue
			}
			out <- req
		}
	}()
	return ch, out, nil
}

// refuseChannel rejects every channel but sessions: port forwarding
// (direct-tcpip) and the like. OpenSSH prints the message.
func refuseChannel(_ *ssh.Server, _ *gossh.ServerConn, newChan gossh.NewChannel, ctx ssh.Context) {
	what := "channel " + newChan.ChannelType()
	if newChan.ChannelType() == "direct-tcpip" {
		what = "port forwarding"
	}
	note(ctx, what)
	_ = newChan.Reject(gossh.Prohibited, "tasktop serve refuses "+what+": it runs tasktop only")
}

// refuseRequest answers no to every global request: remote port
// forwarding (tcpip-forward) and the like. Keepalives, which want a
// reply whatever it is, are answered no too, which is all they need.
func (s *Server) refuseRequest(ctx ssh.Context, _ *ssh.Server, req *gossh.Request) (bool, []byte) {
	switch req.Type {
	case "tcpip-forward", "streamlocal-forward@openssh.com":
		note(ctx, "remote port forwarding")
		s.log.Info("ssh remote port forwarding refused", "addr", ctx.RemoteAddr().String())
	}
	return false, nil
}

// refuseSubsystem answers SFTP and every other subsystem with a message
// and exit status 1.
func (s *Server) refuseSubsystem(sess ssh.Session) {
	s.log.Info("ssh subsystem refused", "subsystem", sess.Subsystem(), "addr", sess.RemoteAddr().String())
	say(sess, "the %s subsystem is refused: this server runs tasktop only", sess.Subsystem())
	_ = sess.Exit(1)
}
