package store

import (
	"context"
	"fmt"
	"os"

	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// Offer is what installing a package would grant, for its consent: the
// request, and, for an upgrade, how it asks for more than the consent of
// its connector's active version.
type Offer struct {
	Request
	// Active is the version of the same FQN now served; empty when none.
	Active string `json:"active,omitempty"`
	// Widening lists how Request asks for more than Active's consent
	// (Request.Exceeds): such an install is quarantined.
	Widening []string `json:"widening,omitempty"`
}

// Offer stages the package at path and returns what it asks for, without
// installing it. The errors are Install's, less the consent's.
func (s *Store) Offer(ctx context.Context, path string) (Offer, error) {
	return s.OfferWith(ctx, path, InstallOptions{})
}

// OfferWith is Offer with the options the install will have.
func (s *Store) OfferWith(ctx context.Context, path string, opts InstallOptions) (Offer, error) {
	st, err := s.stage(ctx, path, opts)
	if err != nil {
		return Offer{}, err
	}
	defer os.RemoveAll(st.dir)
	ix, err := s.readIndex(ctx)
	if err != nil {
		return Offer{}, err
	}
	o := Offer{Request: st.req}
	if c := ix.Connectors[st.req.FQN]; c != nil {
		o.Active = c.Active
	}
	if o.Widening, err = s.widening(ctx, s.DB, ix, st.req); err != nil {
		return Offer{}, err
	}
	return o, nil
}

// widening lists how req asks for more than the consent of the active
// version of its FQN (none when there is no other active version). A
// consent that cannot be read counts as asking for more: the version is
// quarantined, never served unseen.
func (s *Store) widening(ctx context.Context, q state.Querier, ix *storeIndex, req Request) ([]string, error) {
	c := ix.Connectors[req.FQN]
	if c == nil || c.Active == req.Version {
		return nil, nil
	}
	base, err := s.consentedRequest(ctx, q, req.FQN, c.Active, c.Versions[c.Active].Hash)
	if err != nil {
		return []string{fmt.Sprintf("the consent of the active version %s cannot be read (%v)", c.Active, err)}, nil
	}
	return req.Exceeds(base), nil
}

// Pending returns the quarantined version ref (FQN@VERSION) as an Offer:
// what it was installed under, and how that asks for more than the active
// version's consent. A version that is not installed wraps
// state.ErrNotFound; one that is not quarantined, state.ErrConflict.
func (s *Store) Pending(ctx context.Context, ref string) (Offer, error) {
	fqn, version, e, ix, err := s.quarantined(ctx, ref)
	if err != nil {
		return Offer{}, err
	}
	req, err := s.consentedRequest(ctx, s.DB, fqn, version, e.Hash)
	if err != nil {
		return Offer{}, err
	}
	o := Offer{Request: req, Active: ix.Connectors[fqn].Active}
	if o.Widening, err = s.widening(ctx, s.DB, ix, req); err != nil {
		return Offer{}, err
	}
	return o, nil
}

// quarantined finds the quarantined version ref in the index.
func (s *Store) quarantined(ctx context.Context, ref string) (fqn, version string, e indexVersion, ix *storeIndex, err error) {
	if err = s.checkDir(); err != nil {
		return
	}
	if fqn, version, err = policy.ParseRef(ref); err != nil {
		err = fmt.Errorf("%w: %v", state.ErrInvalidArgument, err)
		return
	}
	if ix, err = s.readIndex(ctx); err != nil {
		return
	}
	c := ix.Connectors[fqn]
	ok := false
	if c != nil {
		e, ok = c.Versions[version]
	}
	switch {
	case !ok:
		err = fmt.Errorf("%w: %s is not installed (see `aileron connector list`)", state.ErrNotFound, ref)
	case !e.Quarantined:
		err = fmt.Errorf("%w: %s is not quarantined: it is served or may be made so by reinstalling it", state.ErrConflict, ref)
	}
	return
}

// Approve activates the quarantined version ref under consent c, which
// must name its hash (see Pending), and records c as its consent. active
// is the set of specs currently enforced, as for Install. Errors: Pending's,
// ErrConsentMismatch, a package that no longer matches its hash
// (ErrTampered), or a conflict with another connector (state.ErrConflict).
func (s *Store) Approve(ctx context.Context, ref string, active []policy.Source, c Consent) (Installed, error) {
	fqn, version, e, _, err := s.quarantined(ctx, ref)
	if err != nil {
		return Installed{}, err
	}
	req, err := s.consentedRequest(ctx, s.DB, fqn, version, e.Hash)
	if err != nil {
		return Installed{}, err
	}
	if err := c.check(req); err != nil {
		return Installed{}, err
	}
	if c.By == "" {
		return Installed{}, fmt.Errorf("%w: the consent does not say who gave it", state.ErrInvalidArgument)
	}
	src, err := s.checkPackage(ctx, fqn, version, e.Hash)
	if err != nil {
		return Installed{}, err
	}
	if err := checkConflicts(src, active); err != nil {
		return Installed{}, err
	}
	err = s.update(ctx, func(ctx context.Context, tx *state.Tx, ix *storeIndex) error {
		cur, ok := indexVersion{}, false
		if ic := ix.Connectors[fqn]; ic != nil {
			cur, ok = ic.Versions[version]
		}
		if !ok || cur.Hash != e.Hash || !cur.Quarantined {
			return fmt.Errorf("%w: %s changed while it was being approved; run approve again", state.ErrConflict, ref)
		}
		if err := activateVersion(ctx, tx, fqn, version, e.Hash, e.InstalledAt); err != nil {
			return err
		}
		return saveConsent(ctx, tx, req, c, s.now().UTC().Round(0))
	})
	if err != nil {
		return Installed{}, err
	}
	s.log().Info().Str("event", "store.approved").Str("connector", ref).Str("hash", e.Hash).Str("consent_by", c.By).
		Msg("quarantined connector version approved and now served")
	return Installed{FQN: fqn, Version: version, Hash: e.Hash, Dir: s.packageDir(e.Hash), Active: true,
		InstalledAt: e.InstalledAt, Grants: req.Grants, Signature: req.Signature}, nil
}
