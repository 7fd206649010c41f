package oauth

import (
	"net/http"
	"strings"
)

// Challenge is one challenge of a WWW-Authenticate header (RFC 9110 §11.6.1):
// its scheme and its parameters (names in lower case).
type Challenge struct {
	Scheme string
	Params map[string]string
}

// Bearer is the Bearer challenge among a response's WWW-Authenticate headers
// (RFC 6750 §3), or nil when there is none.
func Bearer(h http.Header) *Challenge {
	for _, c := range ParseChallenges(h.Values("WWW-Authenticate")) {
		if strings.EqualFold(c.Scheme, "Bearer") {
			return &c
		}
	}
	return nil
}

// Scopes are the challenge's scope parameter, split.
func (c *Challenge) Scopes() []string {
	if c == nil {
		return nil
	}
	return strings.Fields(c.Params["scope"])
}

// Param returns the parameter name ("" for a nil challenge or none).
func (c *Challenge) Param(name string) string {
	if c == nil {
		return ""
	}
	return c.Params[name]
}

// maxChallengeBytes bounds the header text parsed.
const maxChallengeBytes = 16 << 10

// ParseChallenges parses WWW-Authenticate header values into their
// challenges: `scheme [token68 | name=value, ...]`, values tokens or quoted
// strings, challenges separated by commas. What does not parse ends the
// value's challenges; a token68 is kept under the empty name.
func ParseChallenges(values []string) []Challenge {
	var out []Challenge
	for _, v := range values {
		if len(v) > maxChallengeBytes {
			v = v[:maxChallengeBytes]
		}
		p := &challengeParser{s: v}
		for {
			p.skipSpaceAndCommas()
			scheme := p.token()
			if scheme == "" {
				break
			}
			c := Challenge{Scheme: scheme, Params: map[string]string{}}
			p.params(&c)
			out = append(out, c)
		}
	}
	return out
}

type challengeParser struct {
	s string
	i int
}

func (p *challengeParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *challengeParser) skipSpaceAndCommas() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == ',') {
		p.i++
	}
}

// isTchar reports whether b may be in a token (RFC 9110 §5.6.2).
func isTchar(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

func (p *challengeParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// params reads the challenge's parameters, up to the next challenge's scheme
// (a token not followed by '=') or the end.
func (p *challengeParser) params(c *Challenge) {
	for {
		p.skipSpaceAndCommas()
		start := p.i
		name := p.token()
		if name == "" {
			return
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != '=' {
			p.i = start // the next challenge's scheme
			return
		}
		// A token68 ends with '=' padding and no value after it.
		eq := p.i
		for p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
		}
		p.skipSpace()
		if p.i-eq > 1 || p.i >= len(p.s) || p.s[p.i] == ',' {
			c.Params[""] = p.s[start:eq] + strings.Repeat("=", max(p.i-eq, 1))
			continue
		}
		var val string
		if p.s[p.i] == '"' {
			var ok bool
			if val, ok = p.quoted(); !ok {
				return
			}
		} else {
			val = p.token()
		}
		c.Params[strings.ToLower(name)] = val
	}
}

// quoted reads a quoted-string, unescaping quoted pairs.
func (p *challengeParser) quoted() (string, bool) {
	p.i++ // the opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		ch := p.s[p.i]
		p.i++
		switch ch {
		case '"':
			return b.String(), true
		case '\\':
			if p.i < len(p.s) {
				b.WriteByte(p.s[p.i])
				p.i++
			}
		default:
			b.WriteByte(ch)
		}
	}
	return "", false
}
