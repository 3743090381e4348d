//! The terminal view (ratatui): keys, drawing.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TableRow, Table, TableState};
use tokio::sync::watch;

use super::*;

/// What the keys have set.
pub(super) struct Ui {
    pub(super) sort: usize,
    pub(super) reverse: bool,
    pub(super) filter: String,
    /// Editing the filter (after `/`).
    pub(super) editing: Option<String>,
    pub(super) table: TableState,
}

pub(super) enum Exit {
    Quit,
    TooSmall(u16, u16),
}

pub(super) fn tui(
    rx: watch::Receiver<Arc<View>>,
    sort: usize,
    reverse: bool,
    filter: String,
) -> ExitCode {
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("switchman top: cannot use the terminal: {e}");
            return ExitCode::from(2);
        }
    };
    let mut ui = Ui {
        sort,
        reverse,
        filter,
        editing: None,
        table: TableState::default(),
    };
    let result = ui_loop(&mut terminal, rx, &mut ui);
    ratatui::restore();
    match result {
        Ok(Exit::Quit) => ExitCode::SUCCESS,
        Ok(Exit::TooSmall(w, h)) => {
            eprintln!(
                "switchman top: the terminal is {w}x{h}; the view needs at least {MIN_WIDTH}x{MIN_HEIGHT} (use --once for a text table)"
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("switchman top: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(super) fn ui_loop(
    terminal: &mut ratatui::DefaultTerminal,
    rx: watch::Receiver<Arc<View>>,
    ui: &mut Ui,
) -> std::io::Result<Exit> {
    loop {
        let size = terminal.size()?;
        if size.width < MIN_WIDTH || size.height < MIN_HEIGHT {
            return Ok(Exit::TooSmall(size.width, size.height));
        }
        let view = rx.borrow().clone();
        terminal.draw(|f| draw(f, &view, ui))?;
        if !event::poll(Duration::from_millis(150))? {
            continue;
        }
        match event::read()? {
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                if let Some(edit) = ui.editing.as_mut() {
                    match k.code {
                        KeyCode::Enter => {
                            ui.filter = edit.clone();
                            ui.editing = None;
                        }
                        KeyCode::Esc => ui.editing = None,
                        KeyCode::Backspace => {
                            edit.pop();
                        }
                        KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                            edit.push(c)
                        }
                        _ => {}
                    }
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(Exit::Quit),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(Exit::Quit);
                    }
                    KeyCode::Char('s') => ui.sort = (ui.sort + 1) % SORTS.len(),
                    KeyCode::Char('S') => ui.sort = (ui.sort + SORTS.len() - 1) % SORTS.len(),
                    KeyCode::Char('r') => ui.reverse = !ui.reverse,
                    KeyCode::Char('/') => ui.editing = Some(ui.filter.clone()),
                    KeyCode::Char('c') => ui.filter.clear(),
                    KeyCode::Down | KeyCode::Char('j') => ui.table.select_next(),
                    KeyCode::Up | KeyCode::Char('k') => ui.table.select_previous(),
                    _ => {}
                }
            }
            // The next turn measures the new size.
            _ => {}
        }
    }
}

pub(super) fn state_style(state: &str) -> Style {
    match state {
        "ejected" => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        "draining" => Style::default().fg(Color::Magenta),
        "warming" => Style::default().fg(Color::Yellow),
        "disabled" => Style::default().fg(Color::DarkGray),
        _ => Style::default().fg(Color::Green),
    }
}

pub(super) fn draw(f: &mut ratatui::Frame<'_>, view: &View, ui: &mut Ui) {
    let rows = arrange(&view.rows, ui.sort, ui.reverse, &ui.filter);
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let lines = header_lines(&view.header, view.rows.len(), rows.len());
    let mut head_lines: Vec<Line<'_>> = vec![
        Line::from(Span::styled(
            format!("switchman top  {}", lines[0]),
            Style::default().add_modifier(Modifier::BOLD),
        )),
        Line::from(lines[1].clone()),
        Line::from(lines[2].clone()),
    ];
    if let Some(e) = &view.error {
        head_lines.push(Line::from(Span::styled(
            format!("! {e}"),
            Style::default().fg(Color::Red),
        )));
    } else if view.header.source.is_empty() {
        head_lines.push(Line::from("reading..."));
    }
    f.render_widget(Paragraph::new(head_lines), head);

    let widths = [
        Constraint::Min(15),
        Constraint::Length(5),
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(22),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(5),
    ];
    let sorted = SORTS[ui.sort % SORTS.len()];
    let header = TableRow::new(COLUMNS.iter().map(|c| {
        let name = c.split(' ').next().unwrap_or(c).to_ascii_lowercase();
        let style = if name == sorted || (sorted == "ejections" && name == "eject") {
            Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        };
        Cell::from(*c).style(style)
    }));
    let table_rows = rows.iter().map(|r| {
        let c = cells(r);
        TableRow::new(c.into_iter().enumerate().map(|(i, v)| {
            let cell = Cell::from(v);
            if i == 6 {
                cell.style(state_style(&r.state))
            } else {
                cell
            }
        }))
    });
    let table = Table::new(table_rows, widths)
        .header(header)
        .block(Block::default().borders(Borders::TOP))
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    f.render_stateful_widget(table, body, &mut ui.table);

    let footer = match &ui.editing {
        Some(edit) => format!("filter: {edit}_   (Enter apply, Esc cancel)"),
        None => format!(
            "sort {}{} | filter {} | s/S sort  r reverse  / filter  c clear  q quit",
            sorted,
            if ui.reverse { " (reversed)" } else { "" },
            if ui.filter.is_empty() {
                "-"
            } else {
                &ui.filter
            }
        ),
    };
    f.render_widget(
        Paragraph::new(footer).style(Style::default().add_modifier(Modifier::DIM)),
        foot,
    );
}
