package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// redisProxy starts an in-process toxiproxy to upstream; it stops with
// the test.
func redisProxy(t *testing.T, upstream string) *toxiproxy.Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	p := toxiproxy.NewProxy(srv, "redis", "127.0.0.1:0", upstream)
	require.NoError(t, p.Start())
	t.Cleanup(p.Stop)
	return p
}

// addToxic adds a toxic to p's connections, those open included.
func addToxic(t *testing.T, p *toxiproxy.Proxy, typ, stream, attrs string) {
	t.Helper()
	js := fmt.Sprintf(`{"name":"%s_%s","type":%q,"stream":%q,"attributes":%s}`, typ, stream, typ, stream, attrs)
	_, err := p.Toxics.AddToxicJson(strings.NewReader(js))
	require.NoError(t, err)
}

func msgIDs(msgs []*task.Message) []int64 {
	out := make([]int64, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	slices.Sort(out)
	return out
}

// A push whose LPUSH reached Redis but whose reply was lost fails as
// unsettled: the caller must not hand back tasks whose messages are in
// the queue. A message that could not be encoded is not unsettled.
func TestPushWithoutReplyIsUnsettled(t *testing.T) {
	t.Parallel()
	for name, toxic := range map[string]struct{ typ, attrs string }{
		// The proxy closes the client's connection when Redis's reply
		// arrives: Redis ran the command, the client reads EOF.
		"closed after the reply": {"limit_data", `{"bytes":0}`},
		// The reply never comes: the read times out.
		"reply dropped": {"timeout", `{"timeout":0}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			addr := testenv.PrivateRedis(t, 0)
			p := redisProxy(t, addr)
			b, err := broker.Open(ctx, broker.Options{Addr: p.Listen, Prefix: "t:", ReadTimeout: 200 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(func() { b.Close() })
			direct := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { direct.Close() })

			var msgs []*task.Message
			for id := range int64(3) {
				msgs = append(msgs, &task.Message{ID: id + 1, Attempt: 2, Code: "q", Queue: "q", Priority: task.DefaultPriority, Payload: json.RawMessage(`{}`)})
			}
			bad := &task.Message{ID: 9, Attempt: 2, Code: "q", Queue: "q", Priority: task.DefaultPriority, Payload: json.RawMessage(`{not json`)}

			// A push before the toxic leaves a connection ready: the one
			// under test is sent at once, not held up by a handshake.
			_, err = b.Push(ctx, []*task.Message{{ID: 100, Attempt: 1, Code: "w", Queue: "w", Payload: json.RawMessage(`{}`)}})
			require.NoError(t, err)
			addToxic(t, p, toxic.typ, "downstream", toxic.attrs)
			failed, err := b.Push(ctx, append(slices.Clone(msgs), bad))
			require.Error(t, err)
			require.False(t, broker.IsOOM(err))
			require.Equal(t, []int64{1, 2, 3, 9}, msgIDs(failed))
			require.Equal(t, []int64{1, 2, 3}, msgIDs(broker.Unsettled(err)), "sent with no reply: unsettled (err: %v)", err)

			// They are in the queue, each once.
			lane := b.Keys.Lane("q", 0, task.DefaultPriority)
			require.Eventually(t, func() bool { return direct.LLen(ctx, lane).Val() >= 3 }, 10*time.Second, 5*time.Millisecond)
			raws, err := direct.LRange(ctx, lane, 0, -1).Result()
			require.NoError(t, err)
			var queued []*task.Message
			for _, raw := range raws {
				m, err := task.DecodeMessage([]byte(raw))
				require.NoError(t, err)
				require.Equal(t, 2, m.Attempt)
				queued = append(queued, m)
			}
			require.Equal(t, []int64{1, 2, 3}, msgIDs(queued))
		})
	}
}

// A push that certainly did not reach Redis fails, and is not unsettled:
// no connection could be opened or made ready, the context was done, or
// Redis refused it.
func TestPushNotAppliedIsFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	msgs := []*task.Message{
		{ID: 1, Attempt: 1, Code: "q", Queue: "q", Priority: task.DefaultPriority, Payload: json.RawMessage(`{}`)},
		{ID: 2, Attempt: 1, Code: "q", Queue: "q", Priority: task.DefaultPriority, Payload: json.RawMessage(`{}`)},
	}
	t.Run("refused connection", func(t *testing.T) {
		t.Parallel()
		b, err := broker.Dial(ctx, broker.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), Prefix: "t:"})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		failed, err := b.Push(ctx, msgs)
		require.Error(t, err)
		require.Equal(t, []int64{1, 2}, msgIDs(failed))
		require.Empty(t, broker.Unsettled(err), "nothing was sent (err: %v)", err)
	})
	t.Run("handshake cut", func(t *testing.T) {
		t.Parallel()
		// Every connection is closed as its first reply arrives: a new
		// connection's HELLO reached Redis, the push never went after it.
		// Its EOF reads like that of a push whose reply was lost.
		addr := testenv.PrivateRedis(t, 0)
		p := redisProxy(t, addr)
		addToxic(t, p, "limit_data", "downstream", `{"bytes":0}`)
		b, err := broker.Dial(ctx, broker.Options{Addr: p.Listen, Prefix: "t:"})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		failed, err := b.Push(ctx, msgs)
		require.Error(t, err)
		require.Equal(t, []int64{1, 2}, msgIDs(failed))
		require.Empty(t, broker.Unsettled(err), "nothing was sent (err: %v)", err)
		direct := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { direct.Close() })
		require.Zero(t, direct.LLen(ctx, b.Keys.Lane("q", 0, task.DefaultPriority)).Val())
	})
	t.Run("at maxmemory", func(t *testing.T) {
		t.Parallel()
		b, err := broker.Open(ctx, broker.Options{Addr: testenv.FullRedis(t), Prefix: "t:"})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		failed, err := b.Push(ctx, msgs)
		require.True(t, broker.IsOOM(err), "err: %v", err)
		require.Equal(t, []int64{1, 2}, msgIDs(failed))
		require.Empty(t, broker.Unsettled(err))
	})
	t.Run("context done", func(t *testing.T) {
		t.Parallel()
		b, err := broker.Open(ctx, broker.Options{Addr: testenv.PrivateRedis(t, 0), Prefix: "t:"})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		done, cancel := context.WithCancel(ctx)
		cancel()
		failed, err := b.Push(done, msgs)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, []int64{1, 2}, msgIDs(failed))
		require.Empty(t, broker.Unsettled(err))
		n, err := b.QueueLen(ctx, "q")
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// cutOnce forwards TCP connections to a server, but closes the first
// connection to send an LPUSH as the reply arrives: Redis ran the command,
// and the client reads EOF. Everything else goes through.
type cutOnce struct {
	ln     net.Listener
	target string
	done   atomic.Bool // a connection was cut
	wg     sync.WaitGroup
}

func newCutOnce(t *testing.T, target string) *cutOnce {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutOnce{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *cutOnce) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		var sent atomic.Bool // an LPUSH went up
		p.wg.Add(2)
		go p.pipe(c, up, func(b []byte) bool { // client to Redis
			if bytes.Contains(bytes.ToLower(b), []byte("lpush")) {
				sent.Store(true)
			}
			return true
		})
		go p.pipe(up, c, func([]byte) bool { // Redis to client: the first reply after an LPUSH is cut
			return !(sent.Load() && p.done.CompareAndSwap(false, true))
		})
	}
}

// pipe copies from to to until either fails or pass turns a read down,
// then closes both.
func (p *cutOnce) pipe(from, to net.Conn, pass func([]byte) bool) {
	defer p.wg.Done()
	defer from.Close()
	defer to.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if !pass(buf[:n]) {
				return
			}
			if _, err := to.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A push is sent once: a retry on a new connection after the lost reply
// would push its messages a second time, and report success.
func TestPushIsSentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := testenv.PrivateRedis(t, 0)
	p := newCutOnce(t, addr)
	b, err := broker.Open(ctx, broker.Options{Addr: p.ln.Addr().String(), Prefix: "t:"})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { direct.Close() })

	msgs := []*task.Message{{ID: 1, Attempt: 1, Code: "q", Queue: "q", Priority: task.DefaultPriority, Payload: json.RawMessage(`{}`)}}
	failed, err := b.Push(ctx, msgs)
	require.Equal(t, []int64{1}, msgIDs(failed))
	require.Equal(t, []int64{1}, msgIDs(broker.Unsettled(err)), "err: %v", err)
	n, err := direct.LLen(ctx, b.Keys.Lane("q", 0, task.DefaultPriority)).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "pushed once")
}
