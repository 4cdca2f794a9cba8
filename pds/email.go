package pds

import (
	"strings"
	"unicode/utf8"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/mail"
)

// validEmail follows the rules of the validator the reference uses
// (@hapi/address with its defaults): one @, a local part of dot-separated
// atoms (no quoting), a domain of at least two labels whose last starts with
// a letter, and the length limits. The reference also refuses ~9k
// disposable-mail domains; fakepds does not (docs/known-differences.md).
func validEmail(email string) bool {
	if email == "" || len(email) > 254 || !utf8.ValidString(email) {
		return false
	}
	local, domain, ok := strings.Cut(email, "@")
	if !ok || strings.Contains(domain, "@") || local == "" || len(local) > 64 {
		return false
	}
	for _, atom := range strings.Split(local, ".") {
		if atom == "" {
			return false
		}
		for _, r := range atom {
			if r < 0x80 && !isAtext(byte(r)) {
				return false
			}
		}
	}
	if len(domain) > 256 {
		return false
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return false
	}
	for i, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for j := 0; j < len(l); j++ {
			c := l[j]
			if !(isAlnum(c) || c == '-') {
				return false
			}
		}
		if i == len(labels)-1 && !(c0IsLetter(l)) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func c0IsLetter(s string) bool {
	c := s[0]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// isAtext is RFC 5322's atext: what a dot-atom local part may hold.
func isAtext(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-/=?^_`{|}~", c) >= 0
}

// sendMail captures the email the reference would send.
func (s *Server) sendMail(acc *account.Account, purpose account.Purpose, token, subject string) {
	s.outbox.Send(mail.Message{
		To: acc.Email, DID: acc.DID, Purpose: string(purpose), Token: token, Subject: subject,
		Body: subject + ": " + token, Time: s.clock.Now(),
	})
}

// Outbox holds every email the server would have sent.
func (s *Server) Outbox() *mail.Outbox { return &s.outbox }
