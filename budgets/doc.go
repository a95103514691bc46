// Package budgets owns per-session usage counters and limit checks: it
// implements dataplane.Budgets over the shared state. A session's limits
// (policy.Limits: the models its model calls may ask for, and budgets of
// tokens, requests and request bytes) travel with the session; what each
// session with a budget has used in its current window is one row of the
// budget_usage table, changed only by single conditional upserts, so the
// nodes of a fleet share one count and a restart loses none.
//
// Windows are fixed and aligned to the session's creation: window k of a
// session created at C with window W is [C+k·W, C+(k+1)·W), and a budget
// without a window is counted over the session's life. A request is
// admitted while every budget of the current window is under its limit;
// the requests budget counts it at admission, and its bytes and tokens are
// charged, to the window current when it ends, after it ended. So a
// request that starts under every budget is sent whole, and the one after
// a budget was crossed is refused until the window frees it.
//
// It imports state, policy and dataplane's types; never another
// control-plane store.
package budgets
