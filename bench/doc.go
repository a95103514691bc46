// Command bench measures Aileron's proxy against a direct client→upstream
// run in the same invocation (and against mitmproxy's mitmdump when given),
// and prints one table of ratios with the DESIGN.md §5 budgets next to them.
// It is run by `make bench` (scripts/bench.sh); see bench/README.md.
package main
