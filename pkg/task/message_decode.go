package task

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// decodePlain parses a message as Encode writes it, without reflection:
// one object of Message's own keys, spelled as Encode spells them, whose
// values are integers of at most 18 digits, strings without escapes, the
// type's name, booleans, and any JSON for payload and then. On anything
// else (another key, an escape, a null, a float, invalid JSON) it returns
// false and DecodeMessage falls back to encoding/json, whose result it
// equals whenever it returns true (FuzzDecodeMessage).
func decodePlain(b []byte) (*Message, bool) {
	s := plainScan{b: b}
	m := &Message{}
	s.space()
	if !s.eat('{') {
		return nil, false
	}
	for {
		s.space()
		key, ok := s.plain()
		s.space()
		if !ok || !s.eat(':') {
			return nil, false
		}
		s.space()
		switch string(key) {
		case "id":
			m.ID, ok = s.int(64)
		case "attempt":
			m.Attempt, ok = intOf(s.int(strconv.IntSize))
		case "code":
			m.Code, ok = s.str()
		case "queue":
			m.Queue, ok = s.str()
		case "type":
			m.Type, ok = s.typ()
		case "payload":
			m.Payload, ok = s.raw()
		case "unique_key":
			m.UniqueKey, ok = s.str()
		case "cron":
			m.CronExpr, ok = s.str()
		case "tz":
			m.Timezone, ok = s.str()
		case "timeout":
			m.Timeout, ok = intOf(s.int(strconv.IntSize))
		case "max_retry":
			m.MaxRetry, ok = intOf(s.int(strconv.IntSize))
		case "retry_count":
			m.RetryCount, ok = intOf(s.int(strconv.IntSize))
		case "priority":
			m.Priority, ok = intOf(s.int(strconv.IntSize))
		case "due_ms":
			m.DueUnixMS, ok = s.int(64)
		case "dispatched_ms":
			m.DispatchedUnixMS, ok = s.int(64)
		case "sched_ms":
			m.ScheduledUnixMS, ok = s.int(64)
		case "then":
			m.Then, ok = s.raw()
		case "batch":
			m.Batch, ok = s.int(64)
		case "tp":
			m.TraceParent, ok = s.str()
		case "group":
			m.Group, ok = s.str()
		case "grouped":
			m.Grouped, ok = s.bool()
		default:
			return nil, false
		}
		s.space()
		switch {
		case !ok:
			return nil, false
		case s.eat(','):
		case s.eat('}'):
			s.space()
			return m, s.i == len(s.b)
		default:
			return nil, false
		}
	}
}

// plainScan reads b from i on.
type plainScan struct {
	b []byte
	i int
}

func (s *plainScan) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *plainScan) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// plain reads a string with no escape and no control character, valid
// UTF-8 (encoding/json would replace invalid bytes), and returns its
// bytes.
func (s *plainScan) plain() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start, ascii := s.i, true
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, ascii || utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (s *plainScan) str() (string, bool) {
	v, ok := s.plain()
	return string(v), ok
}

// int reads an integer of at most 18 digits (no int64 overflows) that
// fits in bits.
func (s *plainScan) int(bits int) (int64, bool) {
	neg := s.eat('-')
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	digits := s.b[start:s.i]
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if bits < 64 && n != n<<(64-bits)>>(64-bits) {
		return 0, false
	}
	return n, true
}

func intOf(n int64, ok bool) (int, bool) { return int(n), ok }

// typ reads the type by its name, as Type.MarshalJSON writes it.
func (s *plainScan) typ() (Type, bool) {
	v, ok := s.plain()
	if !ok {
		return 0, false
	}
	for i, name := range typeNames {
		if string(v) == name {
			return Type(i), true
		}
	}
	return 0, false
}

func (s *plainScan) bool() (bool, bool) {
	for _, lit := range [...]string{"true", "false"} {
		if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return lit == "true", true
		}
	}
	return false, false
}

// raw reads one JSON value and returns a copy of its bytes, as
// json.RawMessage keeps them. Its end is found by counting brackets
// outside strings; json.Valid then checks what was found.
func (s *plainScan) raw() (json.RawMessage, bool) {
	start, depth := s.i, 0
	inString := false
scan:
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		switch {
		case inString:
			if c == '\\' {
				s.i++
			} else if c == '"' {
				inString = false
				if depth == 0 {
					s.i++
					break scan
				}
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 { // the message's own end: a bare value ends here
				break scan
			}
			if depth--; depth == 0 {
				s.i++
				break scan
			}
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			break scan
		}
	}
	v := s.b[start:min(s.i, len(s.b))]
	if len(v) == 0 || !json.Valid(v) {
		return nil, false
	}
	return append(json.RawMessage(nil), v...), true
}
