package tui

import "charm.land/lipgloss/v2"

// Styles are the looks of the UI. Nothing is told by colour alone: every
// state also has a word or a mark, so the screen reads the same under
// NO_COLOR (the renderer then drops the colours and keeps bold and
// reverse).
type Styles struct {
	Header, Badge, Tab, ActiveTab, Filter lipgloss.Style
	ErrorBar, Status, StatusErr, Dim      lipgloss.Style
	TableHead, Cursor, Selected           lipgloss.Style
	Bad, Warn, Good                       lipgloss.Style
	Dialog, Button, ActiveButton, Title   lipgloss.Style
}

// DefaultStyles works on dark and light terminals.
func DefaultStyles() Styles {
	red, yellow, green, blue := lipgloss.Color("1"), lipgloss.Color("3"), lipgloss.Color("2"), lipgloss.Color("4")
	return Styles{
		Header:       lipgloss.NewStyle().Bold(true),
		Badge:        lipgloss.NewStyle().Bold(true).Reverse(true).Foreground(yellow),
		Tab:          lipgloss.NewStyle(),
		ActiveTab:    lipgloss.NewStyle().Bold(true).Reverse(true),
		Filter:       lipgloss.NewStyle().Foreground(blue),
		ErrorBar:     lipgloss.NewStyle().Bold(true).Reverse(true).Foreground(red),
		Status:       lipgloss.NewStyle(),
		StatusErr:    lipgloss.NewStyle().Bold(true).Foreground(red),
		Dim:          lipgloss.NewStyle().Faint(true),
		TableHead:    lipgloss.NewStyle().Bold(true).Underline(true),
		Cursor:       lipgloss.NewStyle().Reverse(true),
		Selected:     lipgloss.NewStyle().Bold(true),
		Bad:          lipgloss.NewStyle().Foreground(red).Bold(true),
		Warn:         lipgloss.NewStyle().Foreground(yellow),
		Good:         lipgloss.NewStyle().Foreground(green),
		Dialog:       lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1),
		Button:       lipgloss.NewStyle().Padding(0, 1),
		ActiveButton: lipgloss.NewStyle().Padding(0, 1).Reverse(true).Bold(true),
		Title:        lipgloss.NewStyle().Bold(true),
	}
}
