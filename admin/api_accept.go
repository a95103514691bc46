package admin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/store"
)

// AcceptRequest is the body of POST /v1/proposals/{id}/accept: who
// decides (the CLI sends "cli:" + $USER), the human's edits of the rule
// (each empty field keeps the proposal's, approval defaults to required
// for every method but GET and HEAD), the learned connector's name
// (local://learned/NAME; empty derives it from the session's name), and
// whether every live session gets the connector, not only the proposal's.
type AcceptRequest struct {
	By string `json:"by"`
	proposals.Edits
	Connector   string `json:"connector,omitempty"`
	AllSessions bool   `json:"all_sessions,omitempty"`
}

// AcceptSessionRequest is the body of POST /v1/proposals/accept: every
// open proposal of Session accepted with the default rule into one learned
// connector.
type AcceptSessionRequest struct {
	By          string `json:"by"`
	Session     string `json:"session"`
	Connector   string `json:"connector,omitempty"`
	AllSessions bool   `json:"all_sessions,omitempty"`
}

// Acceptance is what accepting did.
type Acceptance struct {
	// Proposals are the proposals accepted, as recorded now.
	Proposals []proposals.Proposal `json:"proposals"`
	// Operations name each proposal's operation in the connector.
	Operations []string `json:"operations"`
	// Connector is the learned connector version installed.
	Connector store.Installed `json:"connector"`
	// Removed are the older versions of it removed.
	Removed []string `json:"removed,omitempty"`
	// Sessions are the sessions whose connector list gained it; a session
	// with an empty list has every connector already.
	Sessions []string `json:"sessions,omitempty"`
	// Approved are the pending approvals of the accepted proposals'
	// requests, approved so that the held requests are decided anew.
	Approved []string `json:"approved,omitempty"`
	// Credential reports that a proposal's requests carried a credential,
	// which the learned rule does not bind.
	Credential bool `json:"credential,omitempty"`
}

// acceptance is one accept in progress: the proposals, their rules, and
// the choices that apply to all of them.
type acceptance struct {
	by, consentBy, name string
	allSessions         bool
	// relax: the human said approval none explicitly (one proposal), so
	// an existing rule's approval may be dropped (proposals.Accepted).
	relax bool
	props []proposals.Proposal
	rules []proposals.Rule
}

// AcceptProposal accepts proposal id under req (see AcceptRequest);
// consentBy names the caller for the install consent. The approvals page
// calls it too.
func (a *API) AcceptProposal(ctx context.Context, id, consentBy string, req AcceptRequest) (Acceptance, error) {
	if a.Proposals == nil {
		return Acceptance{}, fmt.Errorf("%w: this daemon has no proposal store configured", state.ErrNotOpen)
	}
	p, err := a.Proposals.Get(ctx, id)
	if err != nil {
		return Acceptance{}, err
	}
	rule, err := proposals.RuleFor(p, req.Edits)
	if err != nil {
		return Acceptance{}, fmt.Errorf("accepting proposal %s: %w", id, err)
	}
	return a.accept(ctx, acceptance{by: req.By, consentBy: consentBy, name: req.Connector, allSessions: req.AllSessions,
		relax: req.Edits.Approval == proposals.ApprovalNone, props: []proposals.Proposal{p}, rules: []proposals.Rule{rule}})
}

// AcceptSession accepts every open proposal of req.Session, each with its
// default rule, into one learned connector.
func (a *API) AcceptSession(ctx context.Context, consentBy string, req AcceptSessionRequest) (Acceptance, error) {
	if a.Proposals == nil {
		return Acceptance{}, fmt.Errorf("%w: this daemon has no proposal store configured", state.ErrNotOpen)
	}
	if req.Session == "" {
		return Acceptance{}, fmt.Errorf(`%w: "session" is required: the session whose open proposals to accept`, state.ErrInvalidArgument)
	}
	list, err := a.Proposals.List(ctx, req.Session)
	if err != nil {
		return Acceptance{}, err
	}
	job := acceptance{by: req.By, consentBy: consentBy, name: req.Connector, allSessions: req.AllSessions}
	for _, p := range list {
		if p.State != proposals.StateOpen {
			continue
		}
		rule, err := proposals.RuleFor(p, proposals.Edits{})
		if err != nil {
			return Acceptance{}, fmt.Errorf("accepting proposal %s: %w; accept it alone with an edited template, or reject it", p.ID, err)
		}
		job.props, job.rules = append(job.props, p), append(job.rules, rule)
	}
	if len(job.props) == 0 {
		return Acceptance{}, fmt.Errorf("%w: session %s has no open proposals (see aileron proposals list --session %s)",
			state.ErrNotFound, req.Session, req.Session)
	}
	return a.accept(ctx, job)
}

// accept installs job's rules as the next version of its learned
// connector, gives the connector to the sessions, marks the proposals
// accepted and approves their pending approvals. Nothing is accepted when
// the install fails.
func (a *API) accept(ctx context.Context, job acceptance) (Acceptance, error) {
	by, _, err := checkDecision(DecideRequest{By: job.by}, false)
	if err != nil {
		return Acceptance{}, err
	}
	// One accept at a time on this node, from the proposals' state read
	// under the lock to their marking: a second accept of the same
	// proposal installs nothing. Across a fleet, the marking's conditional
	// update still lets one accept alone record it.
	a.acceptMu.Lock()
	defer a.acceptMu.Unlock()
	job.by = by
	for _, p := range job.props {
		if p.State != proposals.StateOpen {
			return Acceptance{}, fmt.Errorf("%w: %s is %s; only an open proposal can be accepted", proposals.ErrDecided, p.ID, p.State)
		}
	}
	if job.name == "" {
		job.name = a.defaultConnectorName(job.props[0].Session)
	}
	if err := proposals.CheckConnectorName(job.name); err != nil {
		return Acceptance{}, err
	}
	out, err := a.installLearned(ctx, job)
	if err != nil {
		return Acceptance{}, err
	}
	if out.Sessions, err = a.giveConnector(ctx, job, out.Connector.FQN); err != nil {
		return out, err
	}
	for i, p := range job.props {
		got, err := a.Proposals.MarkAccepted(ctx, p.ID, job.rules[i], out.Connector.Ref(), job.by)
		if err != nil {
			return out, err
		}
		out.Proposals = append(out.Proposals, got)
		out.Credential = out.Credential || got.Credential
	}
	out.Approved, err = a.releaseHeld(ctx, job)
	return out, err
}

// defaultConnectorName derives the learned connector's name from session
// id's name, or its id when it has none or is gone.
func (a *API) defaultConnectorName(id string) string {
	name := ""
	if a.Sessions != nil {
		if info, err := a.Sessions.Get(id); err == nil {
			name = info.Name
		}
	}
	return proposals.ConnectorName(name, id)
}

// installLearned writes and installs the next version of job's learned
// connector (the active version's operations plus job's rules) under a
// proposals-accept consent, removes its older versions, and reloads the
// policy, all serialised with the other store changes.
func (a *API) installLearned(ctx context.Context, job acceptance) (Acceptance, error) {
	fqn := proposals.LearnedScheme + job.name
	add := make([]proposals.Accepted, len(job.props))
	for i, p := range job.props {
		add[i] = proposals.Accepted{Rule: job.rules[i], Host: p.Host, Port: p.Port, Relax: job.relax}
	}
	var out Acceptance
	c := store.Consent{By: job.consentBy, Via: store.ViaProposal, Audited: a.OnEvent != nil}
	err := a.changeStore(func() error {
		// Read again under the lock: an accept of the same proposal that
		// came first installs nothing more.
		for _, p := range job.props {
			now, err := a.Proposals.Get(ctx, p.ID)
			if err != nil {
				return err
			}
			if now.State != proposals.StateOpen {
				return fmt.Errorf("%w: %s is %s; only an open proposal can be accepted", proposals.ErrDecided, p.ID, now.State)
			}
		}
		list, err := a.Store.List(ctx)
		if err != nil {
			return err
		}
		var versions []string
		for _, in := range list {
			if in.FQN == fqn {
				versions = append(versions, in.Version)
			}
		}
		active, _ := a.Store.Load(ctx)
		old, served := learnedOps(active, fqn)
		if len(versions) > 0 && !served {
			return fmt.Errorf("%w: %s is installed (%s) but no version of it is served, so its rules cannot be carried over; "+
				"see `aileron connector verify`, remove it, or choose another --connector", state.ErrConflict, fqn, strings.Join(versions, ", "))
		}
		version := proposals.NextVersion(versions)
		data, names, err := proposals.LearnedSpec(job.name, version, old, add)
		if err != nil {
			return err
		}
		out.Operations = names
		if out.Connector, err = a.installSpec(ctx, data, active, &c); err != nil {
			return learnedConflict(fqn, err)
		}
		for _, v := range versions {
			if v == version {
				continue
			}
			ref := fqn + "@" + v
			if err := a.Store.Remove(ctx, ref); err != nil {
				return fmt.Errorf("%s@%s is installed, but removing its older version %s failed: %w", fqn, version, ref, err)
			}
			out.Removed = append(out.Removed, ref)
		}
		return nil
	})
	if out.Connector.FQN != "" {
		a.installedEvents(out.Connector, c)
		for _, ref := range out.Removed {
			a.event(audit.EventStoreRemoved, map[string]string{"ref": ref})
		}
	}
	return out, err
}

// installSpec installs the spec data through the store's normal path:
// staged from a private directory, offered, and installed under c with
// the offer's hash.
func (a *API) installSpec(ctx context.Context, data []byte, active []policy.Source, c *store.Consent) (store.Installed, error) {
	dir, err := os.MkdirTemp("", "aileron-learned-")
	if err != nil {
		return store.Installed{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "aileron.connector.v1.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return store.Installed{}, err
	}
	offer, err := a.Store.Offer(ctx, path)
	if err != nil {
		return store.Installed{}, err
	}
	c.Hash = offer.Hash
	return a.Store.Install(ctx, path, active, *c)
}

// installedEvents audits an install as POST /v1/connectors does.
func (a *API) installedEvents(inst store.Installed, c store.Consent) {
	a.event(audit.EventStoreInstalled, map[string]string{"connector": inst.FQN, "version": inst.Version, "hash": inst.Hash,
		"signature": string(inst.Signature.Status)})
	a.event(audit.EventStoreConsented, ConsentDetails(inst, c))
}

// learnedConflict makes a conflict of the learned connector with another
// say that nothing was accepted and what to do.
func learnedConflict(fqn string, err error) error {
	if !errors.Is(err, state.ErrConflict) {
		return err
	}
	return fmt.Errorf("%w; nothing was accepted: where the rule matches requests another connector already decides, "+
		"edit the template or method (or remove the other connector); where a name clashes, choose another --connector than %s", err, fqn)
}

// learnedOps are the operations of fqn's active version among active, and
// whether one is active.
func learnedOps(active []policy.Source, fqn string) ([]policy.OperationSpec, bool) {
	for _, src := range active {
		if src.Spec != nil && src.Spec.Connector.FQN == fqn {
			var ops []policy.OperationSpec
			for _, tool := range src.Spec.Tools {
				ops = append(ops, tool.Operations...)
			}
			return ops, true
		}
	}
	return nil, false
}

// giveConnector adds fqn to the sessions of job's proposals, and to every
// live session when asked, and returns the sessions whose list changed. A
// proposal's session that is gone is skipped.
func (a *API) giveConnector(ctx context.Context, job acceptance, fqn string) ([]string, error) {
	if a.Sessions == nil {
		return nil, nil
	}
	var changed []string
	if job.allSessions {
		ids, err := a.Sessions.AddConnectorEverywhere(ctx, fqn)
		if err != nil {
			return ids, err
		}
		changed = ids
	}
	for _, p := range job.props {
		if slices.Contains(changed, p.Session) {
			continue
		}
		_, ok, err := a.Sessions.AddConnector(ctx, p.Session, fqn)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return changed, err
		}
		if ok {
			changed = append(changed, p.Session)
		}
	}
	for _, id := range changed {
		a.event(audit.EventSessionUpdated, map[string]string{"session": id, "connector_added": fqn})
	}
	return changed, nil
}

// releaseHeld approves, by job's human, every pending approval whose
// request was learned into one of job's proposals and that the proposal's
// rule, as accepted, allows: the data plane decides each held request
// anew, under the rule now installed. A held request the edited rule does
// not allow stays pending: approved, it would be sent once as an unknown
// request the human never judged.
func (a *API) releaseHeld(ctx context.Context, job acceptance) ([]string, error) {
	if a.Approvals == nil {
		return nil, nil
	}
	pending, err := a.Approvals.List(ctx, approvals.Filter{State: dataplane.ApprovalStatePending})
	if err != nil {
		return nil, err
	}
	var done []string
	for _, ap := range pending {
		i := slices.IndexFunc(job.props, func(p proposals.Proposal) bool { return p.ID == ap.Preview.ProposalID })
		if ap.Preview.ProposalID == "" || i < 0 {
			continue
		}
		rule := proposals.Accepted{Rule: job.rules[i], Host: job.props[i].Host, Port: job.props[i].Port}
		if !proposals.Covers(rule, ap.Preview.Method, ap.Preview.Path) {
			continue // the rule as edited does not allow it: it waits for the human's own decision
		}
		if err := a.Approvals.Approve(ctx, ap.ID, job.by); err != nil && !errors.Is(err, state.ErrConflict) {
			return done, err
		}
		done = append(done, ap.ID)
	}
	return done, nil
}
