package claude

// TestedVersion is the Claude Code version ccrelay is tested with: the
// corpus's own captures come from it, CI installs exactly it (.ci/run) and
// `ccrelay version` names it.
const TestedVersion = "2.1.330"
