package workflow

import (
	"maps"
	"slices"
	"strings"
)

// The script languages.
var (
	languages = map[string]bool{"shell": true, "python": true, "javascript": true, "typescript": true, "go": true}
	// languageAliases normalise the other spellings; the runners read a
	// spec's language with NormalLanguage too, so both agree.
	languageAliases = map[string]string{"sh": "shell", "bash": "shell", "py": "python", "js": "javascript", "ts": "typescript", "golang": "go"}
)

// NormalLanguage maps a script action's language field (any case, with
// its aliases) to one of languages; empty means shell. Each has a quoting
// splicer (engine/template/quote), so a script's values are never code.
func NormalLanguage(lang string) (string, bool) {
	lang = strings.ToLower(strings.TrimSpace(lang))
	if lang == "" {
		return "shell", true
	}
	if alias, ok := languageAliases[lang]; ok {
		lang = alias
	}
	return lang, languages[lang]
}

// ServerSide reports whether the server dispatches steps of this action type
// itself instead of a worker.
func ServerSide(typ string) bool {
	return typ == TypeTask || typ == TypeAgent || typ == TypeApproval
}

// Languages returns the script languages, sorted.
func Languages() []string { return slices.Sorted(maps.Keys(languages)) }

// LanguageAliases returns the other spellings NormalLanguage accepts, sorted.
func LanguageAliases() []string { return slices.Sorted(maps.Keys(languageAliases)) }
