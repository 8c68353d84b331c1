package task

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// decodeStd is DecodeMessage's fallback alone.
func decodeStd(b []byte) (*Message, error) {
	var m Message
	err := json.Unmarshal(b, &m)
	return &m, err
}

// FuzzDecodeMessage: whatever the plain decoder accepts, encoding/json
// accepts too and decodes to the same message; the rest falls back to it.
//
//	go test -run NONE -fuzz FuzzDecodeMessage -fuzztime 5m ./pkg/task/
func FuzzDecodeMessage(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		b, err := randomMessage(r, r.IntN(2) == 0).Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"id":1,"attempt":1,"code":"x"}`,
		` { "id" : 1 , "attempt" : 1 , "code" : "x" , "payload" : { "a" : [1, "]}" ] } } `,
		`{"id":1,"attempt":1,"code":"x","payload":null,"then":[{"code":"y"}]}`,
		`{"id":1,"attempt":1,"code":"x","payload":"a\"b}"}`,
		`{"id":1,"attempt":1,"code":"x","payload":{"a":}}`,
		`{"id":1,"attempt":1,"code":"x","payload":[1,2}`,
		`{"id":1,"attempt":1,"code":"x","payload":tru}`,
		`{"id":1,"attempt":1,"code":"x","payload":01}`,
		`{"id":1,"attempt":1,"code":"x","payload":1.5e3,"id":2}`,
		`{"ID":1,"attempt":1,"code":"x"}`,
		`{"id":1,"attempt":1,"code":"x","extra":true}`,
		`{"id":1.0,"attempt":1,"code":"x"}`,
		`{"id":-0,"attempt":1,"code":"x"}`,
		`{"id":1e2,"attempt":1,"code":"x"}`,
		`{"id":null,"attempt":1,"code":"x"}`,
		`{"id":99999999999999999999,"attempt":1,"code":"x"}`,
		`{"id":123456789012345678,"attempt":1,"code":"x"}`,
		`{"id":1,"attempt":1,"code":"caf\u00e9"}`,
		`{"id":1,"attempt":1,"code":"café"}`,
		"{\"id\":1,\"attempt\":1,\"code\":\"\xff\"}",
		"{\"id\":1,\"attempt\":1,\"code\":\"a\tb\"}",
		`{"id":1,"attempt":1,"code":"x","type":"periodic"}`,
		`{"id":1,"attempt":1,"code":"x","type":"Periodic"}`,
		`{"id":1,"attempt":1,"code":"x","type":2}`,
		`{"id":1,"attempt":1,"code":"x","grouped":true,"grouped":false}`,
		`{"id":1,"attempt":1,"code":"x","grouped":truex}`,
		`{"id":1,"attempt":1,"code":"x"}x`,
		`{"id":1,"attempt":1,"code":"x",}`,
		`{"id":1,"attempt":1,"code":"x"`,
		`{}`,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := decodePlain(b)
		if !ok {
			return
		}
		want, err := decodeStd(b)
		if err != nil {
			t.Fatalf("plain decode accepted what encoding/json refuses (%v): %q", err, b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plain decode differs for %q:\n got  %+v\n want %+v", b, got, want)
		}
	})
}

// Every message Encode writes decodes to itself, and those of plain
// strings (what the scheduler pushes) without encoding/json.
func TestEncodedMessagesDecodePlain(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		plain := i%2 == 0
		m := randomMessage(r, plain)
		m.ID, m.Attempt, m.Code = max(1, m.ID), max(1, m.Attempt), m.Code+"c" // an identity
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip of %s:\n got  %+v\n want %+v", b, got, m)
		}
		if p, ok := decodePlain(b); plain && !ok {
			t.Fatalf("not decoded plainly: %s", b)
		} else if ok && !reflect.DeepEqual(p, m) {
			t.Fatalf("plain decode of %s:\n got  %+v\n want %+v", b, p, m)
		}
	}
}

// randomMessage has random fields; plain ones have strings without
// characters Encode escapes.
func randomMessage(r *rand.Rand, plain bool) *Message {
	str := func() string {
		if r.IntN(3) == 0 {
			return ""
		}
		alphabet := "abcxyz09_-:./* "
		if !plain {
			alphabet += "\"\\<>&\n\té€😀\u2028"
		}
		rs := []rune(alphabet)
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteRune(rs[r.IntN(len(rs))])
		}
		return b.String()
	}
	num := func() int64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			if plain { // up to 18 digits
				return r.Int64N(1e18)
			}
			return r.Int64()
		case 2:
			return -r.Int64N(1000)
		}
		return r.Int64N(100000)
	}
	m := &Message{
		ID: num(), Attempt: int(num()), Code: str(), Queue: str(), Type: Type(r.IntN(3)),
		UniqueKey: str(), CronExpr: str(), Timezone: str(), Timeout: int(num()), MaxRetry: int(num()),
		RetryCount: int(num()), Priority: int(num()), DueUnixMS: num(), ScheduledUnixMS: num(), DispatchedUnixMS: num(),
		Batch: num(), TraceParent: str(), Group: str(), Grouped: r.IntN(2) == 0,
	}
	m.Payload = mustJSON(randomValue(r, str, 3)) // a nil one comes back "null"
	if r.IntN(3) == 0 {
		m.Then = mustJSON([]any{map[string]any{"code": str(), "payload": randomValue(r, str, 2)}})
	}
	return m
}

func randomValue(r *rand.Rand, str func() string, depth int) any {
	switch k := r.IntN(7); {
	case k == 0 || depth == 0 && k >= 4:
		return str()
	case k == 1:
		return r.Float64() * 1e6
	case k == 2:
		return r.IntN(2) == 0
	case k == 3:
		return nil
	case k == 4:
		out := map[string]any{}
		for range r.IntN(4) {
			out[str()+"{]"] = randomValue(r, str, depth-1)
		}
		return out
	default:
		out := []any{}
		for range r.IntN(4) {
			out = append(out, randomValue(r, str, depth-1))
		}
		return out
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint(v, err))
	}
	return b
}

// BenchmarkDecodeMessage decodes a message as the scheduler pushes it.
func BenchmarkDecodeMessage(b *testing.B) {
	m := &Message{ID: 1234567, Attempt: 1, Code: "send_email", Queue: "send_email", Payload: json.RawMessage(`{"to":"a@example.com","n":3}`),
		Timeout: 60, MaxRetry: 3, DueUnixMS: 1764600000000, DispatchedUnixMS: 1764600000123}
	raw, err := m.Encode()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		decode func([]byte) (*Message, error)
	}{{"plain", DecodeMessage}, {"encoding-json", decodeStd}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.decode(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
