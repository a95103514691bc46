package main

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Shell completion: `aileron completion SHELL` prints a script that asks
// the binary itself (`aileron __complete WORDS…`) for the candidates, so
// completions are always the commands, subcommands and flags of the
// binary installed.

const completionSynopsis = "completion bash|zsh|fish"

func cmdCompletion(args []string, _ io.Reader, stdout, _ io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintf(stdout, "Usage: aileron %s\n\nPrints a completion script: source <(aileron completion bash), or for zsh and fish\nsave it where the shell looks (see the script's first line).\n", completionSynopsis)
		return nil
	}
	if len(args) != 1 {
		return usagef("want one shell: bash, zsh or fish (e.g. source <(aileron completion bash))")
	}
	script, ok := map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}[args[0]]
	if !ok {
		return usagef("unknown shell %q: want bash, zsh or fish", args[0])
	}
	_, err := io.WriteString(stdout, script)
	return err
}

// cmdComplete prints the candidates for the last word of args (the words
// after "aileron", the last one being completed, maybe ""), one per line.
func cmdComplete(args []string, _ io.Reader, stdout, _ io.Writer) error {
	for _, c := range completions(args) {
		fmt.Fprintln(stdout, c)
	}
	return nil
}

// completions: a command for the first word, a subcommand for the second
// of a group, and otherwise the command's flags for a word that starts
// with "-" (nothing else: arguments are ids and paths the shell completes).
func completions(words []string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	cur := words[len(words)-1]
	var out []string
	switch {
	case len(words) == 1:
		out = append(commandNames(), "help")
	case len(words) == 2 && words[0] == "help":
		out = commandNames()
	case len(words) == 2 && subcommands(words[0]) != nil:
		out = subcommands(words[0])
	case len(words) == 2 && words[0] == "completion":
		out = []string{"bash", "zsh", "fish"}
	case strings.HasPrefix(cur, "-"):
		out = flagsOf(words[:len(words)-1])
	}
	var match []string
	for _, c := range out {
		if strings.HasPrefix(c, cur) {
			match = append(match, c)
		}
	}
	slices.Sort(match)
	return slices.Compact(match)
}

// commandNames are the commands run dispatches (the hidden __complete
// aside).
func commandNames() []string {
	var names []string
	for name := range commands() {
		if !strings.HasPrefix(name, "__") {
			names = append(names, name)
		}
	}
	return names
}

// flagsOf lists the long flags of the command words name (its --help).
func flagsOf(words []string) []string {
	var cmd []string
	for _, w := range words {
		if strings.HasPrefix(w, "-") || len(cmd) == 2 || len(cmd) == 1 && subcommands(cmd[0]) == nil {
			break
		}
		cmd = append(cmd, w)
	}
	if len(cmd) == 0 {
		return nil
	}
	var help strings.Builder
	run(append(cmd, "--help"), strings.NewReader(""), &help, &help)
	var flags []string
	long := regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)`) // pflag's PrintDefaults lines
	for _, m := range long.FindAllStringSubmatch(help.String(), -1) {
		flags = append(flags, m[1])
	}
	return flags
}

const bashCompletion = `# bash completion for aileron: source <(aileron completion bash)
# (for aileron on PATH, and for bin/aileron and ./bin/aileron in a checkout)
_aileron() {
	local IFS=$'\n'
	COMPREPLY=($("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
	[ ${#COMPREPLY[@]} -eq 0 ] && compopt -o default 2>/dev/null
	return 0
}
complete -F _aileron aileron bin/aileron ./bin/aileron
`

const zshCompletion = `#compdef aileron
# zsh completion for aileron: aileron completion zsh > "${fpath[1]}/_aileron"
_aileron() {
	local -a c
	c=("${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	if (( ${#c[@]} )) && [[ -n ${c[1]} ]]; then compadd -- "${c[@]}"; else _files; fi
}
compdef _aileron aileron
`

const fishCompletion = `# fish completion for aileron: aileron completion fish > ~/.config/fish/completions/aileron.fish
complete -c aileron -f -a '(aileron __complete (commandline -opc)[2..-1] (commandline -ct))'
`
