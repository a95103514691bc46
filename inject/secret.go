package inject

import (
	"fmt"
	"strings"
)

// Secret is one credential's material. Exactly the fields of its kind are
// set:
//
//	api_key, bearer, oauth2: Token (for oauth2, the access token obtained
//	                         from an OAuthSource)
//	basic:                   Username, Password
//	aws_sigv4:               AccessKeyID, SecretAccessKey, Service, and
//	                         SessionToken for temporary credentials
//
// A Secret is never printed by this package; do not log it.
type Secret struct {
	Kind string
	// Token is the API key, bearer token or OAuth2 access token.
	Token string
	// Username and Password are HTTP basic credentials. The username is not
	// treated as secret; the password is.
	Username, Password string
	// AccessKeyID, SecretAccessKey and SessionToken are AWS credentials;
	// Service names the AWS service signed for, e.g. "s3" or "execute-api".
	AccessKeyID, SecretAccessKey, SessionToken, Service string
}

// CheckValue refuses a secret value that is empty or contains CR, LF or NUL
// (which would allow header injection or truncation). field names the value
// in the error ("token", "password", …); the value itself never appears.
// Every failure wraps ErrBadSecret.
func CheckValue(field, v string) error {
	if v == "" {
		return fmt.Errorf("%w: %s is empty; set it in the credential", ErrBadSecret, field)
	}
	if i := strings.IndexAny(v, "\r\n\x00"); i >= 0 {
		return fmt.Errorf("%w: %s contains a %s byte at offset %d; secrets cannot hold CR, LF or NUL (re-enter it without the line break)",
			ErrBadSecret, field, ctlName(v[i]), i)
	}
	return nil
}

func ctlName(c byte) string {
	switch c {
	case '\r':
		return "CR"
	case '\n':
		return "LF"
	}
	return "NUL"
}

// secretField is one field of a Secret, for validation.
type secretField struct {
	name string
	v    string
}

// validate checks that s has exactly the fields of its kind, each usable.
// Every failure wraps ErrBadSecret.
func (s *Secret) validate() error {
	var need, optional []secretField
	switch s.Kind {
	case KindAPIKey, KindBearer, KindOAuth2:
		need = []secretField{{"token", s.Token}}
	case KindBasic:
		need = []secretField{{"username", s.Username}, {"password", s.Password}}
	case KindSigV4:
		need = []secretField{{"access_key_id", s.AccessKeyID}, {"secret_access_key", s.SecretAccessKey}, {"service", s.Service}}
		optional = []secretField{{"session_token", s.SessionToken}}
	case "":
		return fmt.Errorf("%w: kind is missing; use api_key, bearer, basic, oauth2 or aws_sigv4", ErrBadSecret)
	default:
		return fmt.Errorf("%w: kind %q is unknown; use api_key, bearer, basic, oauth2 or aws_sigv4", ErrBadSecret, s.Kind)
	}
	for _, f := range need {
		if err := CheckValue(s.Kind+" "+f.name, f.v); err != nil {
			if s.Kind == KindOAuth2 && f.v == "" {
				return fmt.Errorf("%w: oauth2 access token is missing; obtain it with OAuthSource.AccessToken before Apply", ErrBadSecret)
			}
			return err
		}
	}
	for _, f := range optional {
		if f.v != "" {
			if err := CheckValue(s.Kind+" "+f.name, f.v); err != nil {
				return err
			}
		}
	}
	return s.checkForeign(append(need, optional...))
}

// checkForeign refuses fields that belong to another kind: a Secret carrying
// them is a wiring mistake, and sending it could put the wrong value on the
// wire.
func (s *Secret) checkForeign(own []secretField) error {
	all := []secretField{
		{"token", s.Token}, {"username", s.Username}, {"password", s.Password},
		{"access_key_id", s.AccessKeyID}, {"secret_access_key", s.SecretAccessKey},
		{"session_token", s.SessionToken}, {"service", s.Service},
	}
	for _, f := range all {
		if f.v == "" || hasField(own, f.name) {
			continue
		}
		return fmt.Errorf("%w: a %s credential must not set %s; remove it from the credential", ErrBadSecret, s.Kind, f.name)
	}
	if s.Kind == KindBasic && strings.IndexByte(s.Username, ':') >= 0 {
		return fmt.Errorf("%w: basic username contains ':', which HTTP basic authentication cannot carry (RFC 7617)", ErrBadSecret)
	}
	if s.Kind == KindSigV4 && !ValidService(s.Service) {
		return fmt.Errorf("%w: aws_sigv4 service %q must be lower-case letters, digits and dashes, e.g. \"s3\" or \"execute-api\"", ErrBadSecret, s.Service)
	}
	return nil
}

func hasField(fs []secretField, name string) bool {
	for _, f := range fs {
		if f.name == name {
			return true
		}
	}
	return false
}

// ValidService reports whether s is an AWS service name: 1 to 64
// lower-case letters, digits and dashes.
func ValidService(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
