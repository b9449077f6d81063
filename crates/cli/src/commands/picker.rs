//! `cairn rewind [DIR] -i`: a terminal picker over the worktree's states, newest first.
//! Enter previews what the rewind would write and delete, and the diff; a second Enter
//! rewinds (capturing the live files first, so `cairn undo` brings them back); Esc backs
//! out and changes nothing. Drawn with ratatui on stderr, so `--json` still prints one
//! object on stdout.

use std::io::IsTerminal;

use cairn_engine::{
    Detail, DiffOptions, Outcome, RepoPathBuf, Request, RewindOptions, RollbackOutcome,
    TimelineEntry, TimelineOptions,
};
use camino::{Utf8Path, Utf8PathBuf};
use cas::SnapshotId;
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState, Wrap};
use serde::Serialize;

use crate::context::{Ctx, current_dir};
use crate::error::{CliError, Error, io_error};
use crate::output::{Rendered, quote_path};
use crate::progress::Bar;
use crate::render::{self, View};
use crate::target::Target;

/// `cairn rewind [DIR] -i`.
pub fn rewind(ctx: &Ctx, dir: Option<Utf8PathBuf>) -> Result<Rendered, Error> {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(CliError::NoTerminal.into());
    }
    let cwd = current_dir()?;
    let store = ctx.store_path(&cwd)?;
    let engine = Engine {
        target: Target::for_store(&store, ctx.offline),
        cwd,
    };
    let timeline = match engine.call(Request::Timeline(TimelineOptions {
        dir,
        ..TimelineOptions::default()
    }))? {
        Outcome::Timeline(t) => t,
        other => return Err(unexpected(&other)),
    };
    if timeline.entries.is_empty() {
        return Err(CliError::NothingToRewind {
            worktree: timeline.worktree,
        }
        .into());
    }
    let mut picker = Picker::new(timeline.worktree, &timeline.entries);
    let chosen = {
        let mut screen = Screen::enter()?;
        picker.run(&mut screen, &engine)?
    };
    let Some(id) = chosen else {
        let cancelled = Cancelled {
            worktree: picker.worktree.clone(),
            rewound: false,
        };
        let report = crate::output::Report::new(cancelled, "").refused(format!(
            "{}: nothing rewound; the picker was closed",
            picker.worktree
        ));
        return Ok(Rendered::report(ctx.json, report));
    };
    let outcome = engine.call(Request::Rewind(RewindOptions {
        dir: Some(picker.worktree.clone()),
        to: Some(id.to_hex()),
        dry_run: false,
    }))?;
    Ok(Rendered::report(
        ctx.json,
        render::report(&outcome, &View::default()),
    ))
}

/// What `rewind -i` prints when the picker was closed without rewinding.
#[derive(Serialize)]
struct Cancelled {
    worktree: Utf8PathBuf,
    rewound: bool,
}

/// The engine, where the store is (its server, or here).
struct Engine {
    target: Target,
    cwd: Utf8PathBuf,
}

impl Engine {
    fn call(&self, request: Request) -> Result<Outcome, Error> {
        Ok(self
            .target
            .call(&self.cwd, request, &Bar::hidden(), false)?
            .0)
    }

    /// What rewinding to `id` would write and delete, and the diff from the live files.
    fn preview(&self, worktree: &Utf8Path, entry: usize, id: SnapshotId) -> Result<Preview, Error> {
        let dry_run = match self.call(Request::Rewind(RewindOptions {
            dir: Some(worktree.to_owned()),
            to: Some(id.to_hex()),
            dry_run: true,
        }))? {
            Outcome::Rewind(o) => o,
            other => return Err(unexpected(&other)),
        };
        let mut diff = DiffOptions::new(worktree.as_str(), id.to_hex());
        diff.detail = Detail::Contents;
        let patch = match self.call(Request::Diff(diff))? {
            Outcome::Diff(d) => render::patch(&d.changes(), 3, &diff::text::Palette::PLAIN),
            other => return Err(unexpected(&other)),
        };
        Ok(Preview::new(entry, &dry_run, &patch))
    }
}

fn unexpected(outcome: &Outcome) -> Error {
    CliError::UnexpectedOutcome {
        verb: outcome.verb(),
    }
    .into()
}

/// The terminal in raw mode on its alternate screen, drawn through stderr; put back as it
/// was when dropped, whatever ends the picker.
struct Screen {
    terminal: ratatui::Terminal<ratatui::backend::CrosstermBackend<std::io::Stderr>>,
}

impl Screen {
    fn enter() -> Result<Screen, Error> {
        let io = |e: std::io::Error| io_error("terminal", e);
        enable_raw_mode().map_err(io)?;
        let mut stderr = std::io::stderr();
        if let Err(e) = execute!(stderr, EnterAlternateScreen) {
            let _ = disable_raw_mode();
            return Err(io(e));
        }
        let backend = ratatui::backend::CrosstermBackend::new(stderr);
        match ratatui::Terminal::new(backend) {
            Ok(terminal) => Ok(Screen { terminal }),
            Err(e) => {
                let _ = execute!(std::io::stderr(), LeaveAlternateScreen);
                let _ = disable_raw_mode();
                Err(io(e))
            }
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(self.terminal.backend_mut(), LeaveAlternateScreen);
        let _ = disable_raw_mode();
        let _ = self.terminal.show_cursor();
    }
}

/// One state as the list shows it.
#[derive(Debug, Clone)]
struct Item {
    id: SnapshotId,
    /// The checkpoint's name, if it has one.
    name: Option<String>,
    /// The message's first line, unless it only repeats the name.
    message: String,
    created: Option<jiff::Timestamp>,
    /// `3 files: src/a.rs, src/b.rs, …` and `+12 -4`.
    files: String,
    lines: String,
    labels: String,
    head: bool,
    /// Everything `/` matches against, lowercased.
    haystack: String,
}

impl Item {
    fn of(entry: &TimelineEntry) -> Item {
        let snap = &entry.snapshot;
        let first_line = snap.message.lines().next().unwrap_or("").trim().to_owned();
        let message = match &entry.checkpoint {
            Some(name) if first_line == format!("checkpoint {name}") => String::new(),
            _ => first_line,
        };
        let (files, lines, paths) = match &snap.stat {
            Some(stat) => {
                let paths: Vec<String> = stat
                    .changes()
                    .iter()
                    .map(|c| quote_path(c.path.as_bytes()))
                    .collect();
                (
                    files_summary(&paths),
                    if paths.is_empty() {
                        String::new()
                    } else {
                        format!("+{} -{}", stat.stats.insertions, stat.stats.deletions)
                    },
                    paths,
                )
            }
            None => (String::new(), String::new(), Vec::new()),
        };
        let labels = snap.labels.join(" ");
        let haystack = [
            entry.checkpoint.as_deref().unwrap_or(""),
            &snap.message,
            &labels,
            &paths.join(" "),
            &snap.id.to_hex(),
        ]
        .join("\n")
        .to_lowercase();
        Item {
            id: snap.id,
            name: entry.checkpoint.clone(),
            message,
            created: snap.created.parse().ok(),
            files,
            lines,
            labels,
            head: entry.head,
            haystack,
        }
    }

    /// Its name and message as the list's first column shows them.
    fn title(&self) -> Line<'static> {
        let mut spans = Vec::new();
        if let Some(name) = &self.name {
            spans.push(Span::styled(name.clone(), Style::new().bold()));
            if !self.message.is_empty() {
                spans.push(Span::raw(" · "));
            }
        }
        spans.push(Span::raw(self.message.clone()));
        Line::from(spans)
    }
}

/// `3 files: a, b, …`: the count and the first paths.
fn files_summary(paths: &[String]) -> String {
    const SHOWN: usize = 3;
    match paths.len() {
        0 => "no changes".to_owned(),
        n => {
            let mut text = format!(
                "{n} file{}: {}",
                if n == 1 { "" } else { "s" },
                paths[..n.min(SHOWN)].join(", ")
            );
            if n > SHOWN {
                text.push_str(", …");
            }
            text
        }
    }
}

/// How long ago `then` was, as a person says it.
fn ago(then: Option<jiff::Timestamp>, now: jiff::Timestamp) -> String {
    let Some(then) = then else {
        return String::new();
    };
    let seconds = now.as_second() - then.as_second();
    match seconds {
        i64::MIN..=9 => "just now".to_owned(),
        10..=59 => format!("{seconds} s ago"),
        60..=3599 => format!("{} min ago", seconds / 60),
        3600..=86_399 => format!("{} h ago", seconds / 3600),
        86_400..=172_799 => "1 day ago".to_owned(),
        172_800..=604_799 => format!("{} days ago", seconds / 86_400),
        _ => then
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%d")
            .to_string(),
    }
}

/// The preview of one rewind: what it writes and deletes, then the diff.
#[derive(Debug)]
struct Preview {
    /// Which item, in [`Picker::items`].
    item: usize,
    lines: Vec<Line<'static>>,
    scroll: u16,
}

impl Preview {
    fn new(item: usize, dry_run: &RollbackOutcome, patch: &[u8]) -> Preview {
        let mut lines = Vec::new();
        let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        lines.push(Line::from(format!(
            "The rewind writes {} and deletes {}. Your files as they are now are captured first: `cairn undo` brings them back.",
            count(dry_run.written.len(), "file"),
            count(dry_run.deleted.len(), "file"),
        )));
        let path_line = |verb: &'static str, p: &RepoPathBuf, color: Color| {
            Line::from(vec![
                Span::styled(verb, Style::new().fg(color)),
                Span::raw(quote_path(p.as_bytes())),
            ])
        };
        lines.extend(
            dry_run
                .written
                .iter()
                .map(|p| path_line("  write  ", p, Color::Green)),
        );
        lines.extend(
            dry_run
                .deleted
                .iter()
                .map(|p| path_line("  delete ", p, Color::Red)),
        );
        lines.push(Line::default());
        for line in String::from_utf8_lossy(patch).lines() {
            let style = if line.starts_with("+++") || line.starts_with("---") {
                Style::new().bold()
            } else if line.starts_with('+') {
                Style::new().fg(Color::Green)
            } else if line.starts_with('-') {
                Style::new().fg(Color::Red)
            } else if line.starts_with("@@") {
                Style::new().fg(Color::Cyan)
            } else {
                Style::new()
            };
            lines.push(Line::styled(line.to_owned(), style));
        }
        Preview {
            item,
            lines,
            scroll: 0,
        }
    }
}

/// What a key asks for.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    Stay,
    Preview(usize),
    Rewind(SnapshotId),
    Quit,
}

/// The picker's state: the states, the filter, the selection, and an open preview.
struct Picker {
    worktree: Utf8PathBuf,
    items: Vec<Item>,
    filter: String,
    editing_filter: bool,
    /// Indexes into `items` that match the filter, in order.
    shown: Vec<usize>,
    table: TableState,
    /// Rows the list showed last (what PageUp and PageDown move by).
    page: usize,
    preview: Option<Preview>,
    /// A failure to show (a preview that could not be made).
    notice: Option<String>,
}

impl Picker {
    fn new(worktree: Utf8PathBuf, entries: &[TimelineEntry]) -> Picker {
        let items: Vec<Item> = entries.iter().map(Item::of).collect();
        let shown = (0..items.len()).collect();
        Picker {
            worktree,
            items,
            filter: String::new(),
            editing_filter: false,
            shown,
            table: TableState::default().with_selected(Some(0)),
            page: 10,
            preview: None,
            notice: None,
        }
    }

    fn run(&mut self, screen: &mut Screen, engine: &Engine) -> Result<Option<SnapshotId>, Error> {
        let io = |e: std::io::Error| io_error("terminal", e);
        loop {
            let now = jiff::Timestamp::now();
            screen
                .terminal
                .draw(|frame| self.draw(frame, now))
                .map_err(io)?;
            let Event::Key(key) = event::read().map_err(io)? else {
                continue;
            };
            if key.kind != KeyEventKind::Press {
                continue;
            }
            match self.key(key) {
                Action::Stay => {}
                Action::Quit => return Ok(None),
                Action::Rewind(id) => return Ok(Some(id)),
                Action::Preview(item) => {
                    let id = self.items[item].id;
                    match engine.preview(&self.worktree, item, id) {
                        Ok(preview) => self.preview = Some(preview),
                        Err(e) => self.notice = Some(e.to_string()),
                    }
                }
            }
        }
    }

    fn selected(&self) -> Option<usize> {
        self.table
            .selected()
            .and_then(|row| self.shown.get(row))
            .copied()
    }

    fn key(&mut self, key: KeyEvent) -> Action {
        self.notice = None;
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        if let Some(preview) = &mut self.preview {
            let page = u16::try_from(self.page).unwrap_or(u16::MAX);
            let last = u16::try_from(preview.lines.len().saturating_sub(1)).unwrap_or(u16::MAX);
            match key.code {
                KeyCode::Enter => return Action::Rewind(self.items[preview.item].id),
                KeyCode::Esc | KeyCode::Backspace | KeyCode::Char('q') => self.preview = None,
                KeyCode::Up | KeyCode::Char('k') => {
                    preview.scroll = preview.scroll.saturating_sub(1)
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    preview.scroll = preview.scroll.saturating_add(1)
                }
                KeyCode::PageUp => preview.scroll = preview.scroll.saturating_sub(page),
                KeyCode::PageDown | KeyCode::Char(' ') => {
                    preview.scroll = preview.scroll.saturating_add(page)
                }
                _ => {}
            }
            if let Some(preview) = &mut self.preview {
                preview.scroll = preview.scroll.min(last);
            }
            return Action::Stay;
        }
        if self.editing_filter {
            match key.code {
                KeyCode::Enter => self.editing_filter = false,
                KeyCode::Esc => {
                    self.editing_filter = false;
                    self.set_filter(String::new());
                }
                KeyCode::Backspace => {
                    let mut filter = self.filter.clone();
                    filter.pop();
                    self.set_filter(filter);
                }
                KeyCode::Char(c) => self.set_filter(format!("{}{c}", self.filter)),
                KeyCode::Up | KeyCode::Down | KeyCode::PageUp | KeyCode::PageDown => {
                    self.editing_filter = false;
                    return self.key(key);
                }
                _ => {}
            }
            return Action::Stay;
        }
        let last = self.shown.len().saturating_sub(1);
        let row = self.table.selected().unwrap_or(0);
        let select = |table: &mut TableState, row: usize| table.select(Some(row.min(last)));
        match key.code {
            KeyCode::Esc if !self.filter.is_empty() => self.set_filter(String::new()),
            KeyCode::Esc | KeyCode::Char('q') => return Action::Quit,
            KeyCode::Up | KeyCode::Char('k') => select(&mut self.table, row.saturating_sub(1)),
            KeyCode::Down | KeyCode::Char('j') => select(&mut self.table, row + 1),
            KeyCode::PageUp => select(&mut self.table, row.saturating_sub(self.page)),
            KeyCode::PageDown => select(&mut self.table, row + self.page),
            KeyCode::Home | KeyCode::Char('g') => select(&mut self.table, 0),
            KeyCode::End | KeyCode::Char('G') => select(&mut self.table, last),
            KeyCode::Char('/') => self.editing_filter = true,
            KeyCode::Enter => {
                if let Some(item) = self.selected() {
                    return Action::Preview(item);
                }
            }
            _ => {}
        }
        Action::Stay
    }

    fn set_filter(&mut self, filter: String) {
        let needle = filter.to_lowercase();
        self.shown = (0..self.items.len())
            .filter(|&i| self.items[i].haystack.contains(&needle))
            .collect();
        self.filter = filter;
        self.table.select((!self.shown.is_empty()).then_some(0));
    }

    fn draw(&mut self, frame: &mut Frame, now: jiff::Timestamp) {
        let [header, body, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Fill(1),
            Constraint::Length(1),
        ])
        .areas(frame.area());
        self.page = usize::from(body.height.saturating_sub(1)).max(1);
        let help = if self.preview.is_some() {
            "Enter rewind · ↑↓ PgUp PgDn scroll · Esc back"
        } else if self.editing_filter {
            "type to filter · Enter keep · Esc clear"
        } else {
            "↑↓ PgUp PgDn move · / filter · Enter preview · Esc quit"
        };
        let footer_line = match &self.notice {
            Some(notice) => Line::styled(notice.clone(), Style::new().fg(Color::Red)),
            None => Line::styled(help, Style::new().add_modifier(Modifier::DIM)),
        };
        frame.render_widget(Paragraph::new(footer_line), footer);
        match &self.preview {
            Some(preview) => {
                let item = &self.items[preview.item];
                let title = Line::from(
                    [
                        vec![Span::raw("Rewind to ")],
                        item.title().spans,
                        vec![Span::raw(format!(
                            " ({}, {})?",
                            item.id.short(12),
                            ago(item.created, now)
                        ))],
                    ]
                    .concat(),
                );
                frame.render_widget(Paragraph::new(title), header);
                frame.render_widget(
                    Paragraph::new(preview.lines.clone())
                        .wrap(Wrap { trim: false })
                        .scroll((preview.scroll, 0)),
                    body,
                );
            }
            None => {
                self.draw_list(frame, header, body, now);
            }
        }
    }

    fn draw_list(&mut self, frame: &mut Frame, header: Rect, body: Rect, now: jiff::Timestamp) {
        let count = |n: usize| format!("{n} state{}", if n == 1 { "" } else { "s" });
        let title = if self.editing_filter || !self.filter.is_empty() {
            format!(
                "Rewind {} · /{}{} · {} of {}",
                self.worktree,
                self.filter,
                if self.editing_filter { "▏" } else { "" },
                self.shown.len(),
                count(self.items.len())
            )
        } else {
            format!(
                "Rewind {} · {}, newest first",
                self.worktree,
                count(self.items.len())
            )
        };
        frame.render_widget(Paragraph::new(title).bold(), header);
        let rows = self.shown.iter().map(|&i| {
            let item = &self.items[i];
            Row::new(vec![
                Cell::from(if item.head { "@" } else { " " }),
                Cell::from(item.title()),
                Cell::from(ago(item.created, now)),
                Cell::from(Span::styled(
                    item.lines.clone(),
                    Style::new().add_modifier(Modifier::DIM),
                )),
                Cell::from(item.files.clone()),
                Cell::from(Span::styled(
                    item.labels.clone(),
                    Style::new().fg(Color::Cyan),
                )),
            ])
        });
        let table = Table::new(
            rows,
            [
                Constraint::Length(1),
                Constraint::Fill(3),
                Constraint::Length(10),
                Constraint::Length(9),
                Constraint::Fill(4),
                Constraint::Fill(2),
            ],
        )
        .header(Row::new(["", "state", "when", "lines", "files", "labels"]).underlined())
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
        frame.render_stateful_widget(table, body, &mut self.table);
        if self.shown.is_empty() {
            let empty = Rect {
                y: body.y + 1,
                height: 1,
                ..body
            };
            frame.render_widget(
                Paragraph::new(format!("nothing matches /{}", self.filter)),
                empty,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn entry(
        n: u8,
        checkpoint: Option<&str>,
        message: &str,
        labels: &[&str],
        paths: &[&str],
        minutes_ago: i64,
        head: bool,
    ) -> TimelineEntry {
        let now: jiff::Timestamp = NOW.parse().unwrap();
        let created = now - jiff::SignedDuration::from_mins(minutes_ago);
        let changes: Vec<serde_json::Value> = paths
            .iter()
            .map(|p| serde_json::json!({"path": p, "status": "M", "old": null, "new": null, "old_blob": null, "new_blob": null, "old_mode": null, "new_mode": null, "kind": "file", "size": 1, "binary": false, "insertions": 2, "deletions": 1}))
            .collect();
        let value = serde_json::json!({
            "id": format!("{:02x}", n).repeat(32),
            "tree": "00".repeat(32),
            "parents": [],
            "message": message,
            "labels": labels,
            "created": created.to_string(),
            "source": null,
            "stat": {
                "added": [], "removed": [], "renamed": [], "modified": changes,
                "stats": {"files": paths.len(), "insertions": 2 * paths.len(), "deletions": paths.len()}
            },
            "checkpoint": checkpoint,
            "head": head,
        });
        serde_json::from_value(value).expect("a timeline entry")
    }

    const NOW: &str = "2026-11-26T12:00:00Z";

    fn picker() -> Picker {
        let entries = [
            entry(
                3,
                None,
                "Turn 3: fix the login bug",
                &["tool=edit", "agent=fixer"],
                &["src/auth.ts", "src/login.tsx"],
                2,
                true,
            ),
            entry(
                2,
                Some("before-refactor"),
                "checkpoint before-refactor",
                &[],
                &["src/a.rs", "src/b.rs", "src/c.rs", "src/d.rs"],
                75,
                false,
            ),
            entry(
                1,
                None,
                "run: cargo test",
                &["tool=bash"],
                &[],
                60 * 30,
                false,
            ),
        ];
        Picker::new(Utf8PathBuf::from("/work/project"), &entries)
    }

    fn screen(picker: &mut Picker) -> String {
        let mut terminal = Terminal::new(TestBackend::new(120, 11)).unwrap();
        let now = NOW.parse().unwrap();
        terminal.draw(|f| picker.draw(f, now)).unwrap();
        terminal.backend().to_string()
    }

    fn press(picker: &mut Picker, code: KeyCode) -> Action {
        picker.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn the_list_shows_names_messages_times_changes_and_labels_newest_first() {
        insta::assert_snapshot!(screen(&mut picker()));
    }

    #[test]
    fn a_filter_keeps_the_states_it_matches() {
        let mut p = picker();
        press(&mut p, KeyCode::Char('/'));
        for c in "bash".chars() {
            press(&mut p, KeyCode::Char(c));
        }
        insta::assert_snapshot!(screen(&mut p));
        assert_eq!(press(&mut p, KeyCode::Enter), Action::Stay);
        assert_eq!(press(&mut p, KeyCode::Enter), Action::Preview(2));
    }

    #[test]
    fn a_filter_that_matches_nothing_says_so_and_enter_does_nothing() {
        let mut p = picker();
        press(&mut p, KeyCode::Char('/'));
        press(&mut p, KeyCode::Char('~'));
        press(&mut p, KeyCode::Enter);
        assert!(screen(&mut p).contains("nothing matches /~"));
        assert_eq!(press(&mut p, KeyCode::Enter), Action::Stay);
        // Esc clears the filter first, then quits.
        assert_eq!(press(&mut p, KeyCode::Esc), Action::Stay);
        assert_eq!(p.shown.len(), 3);
        assert_eq!(press(&mut p, KeyCode::Esc), Action::Quit);
    }

    #[test]
    fn moving_stops_at_either_end() {
        let mut p = picker();
        press(&mut p, KeyCode::Up);
        assert_eq!(p.selected(), Some(0));
        press(&mut p, KeyCode::PageDown);
        assert_eq!(p.selected(), Some(2));
        press(&mut p, KeyCode::Down);
        assert_eq!(press(&mut p, KeyCode::Enter), Action::Preview(2));
    }

    #[test]
    fn the_preview_lists_writes_and_deletes_then_the_diff_and_a_second_enter_rewinds() {
        let mut p = picker();
        press(&mut p, KeyCode::Down);
        assert_eq!(press(&mut p, KeyCode::Enter), Action::Preview(1));
        let dry_run: RollbackOutcome = serde_json::from_value(serde_json::json!({
            "worktree": "/work/project", "snapshot": "02".repeat(32), "captured": "03".repeat(32),
            "written": ["src/a.rs"], "deleted": ["src/new.rs"], "skipped": [], "dry_run": true,
        }))
        .expect("a rollback outcome");
        let patch = b"--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-new\n+old\n";
        p.preview = Some(Preview::new(1, &dry_run, patch));
        insta::assert_snapshot!(screen(&mut p));
        for _ in 0..3 {
            press(&mut p, KeyCode::PageDown);
        }
        let lines = p.preview.as_ref().map(|v| v.lines.len()).unwrap_or(0);
        assert_eq!(
            p.preview.as_ref().map(|v| usize::from(v.scroll)),
            Some(lines - 1),
            "scrolling stops at the last line"
        );
        assert_eq!(press(&mut p, KeyCode::Esc), Action::Stay);
        assert!(p.preview.is_none());
        p.preview = Some(Preview::new(1, &dry_run, patch));
        assert_eq!(press(&mut p, KeyCode::Enter), Action::Rewind(p.items[1].id));
    }
}
