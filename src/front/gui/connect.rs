//! File → Connect to host…: the address of a `vramwarden agent` and its token, directly or
//! through an SSH tunnel the window starts itself. The window only collects the request; the
//! backend reads the token file, starts `ssh` and opens the link.

use egui::{RichText, Ui};
use serde::{Deserialize, Serialize};

use super::widgets;

/// A host the user connected to before (kept with the window's state; a pasted token is
/// never kept, a token file's path is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedHost {
    /// `http://HOST:PORT`, or for SSH the agent's port on the far side's loopback.
    pub url: String,
    /// `user@host` to tunnel through (no tunnel when empty).
    #[serde(default)]
    pub ssh: String,
    /// A local file holding the agent's token (a copy of its `agent.token`).
    #[serde(default)]
    pub token_file: String,
}

impl SavedHost {
    /// How the host selector names it.
    pub fn label(&self) -> String {
        if self.ssh.is_empty() {
            self.url.trim_start_matches("http://").to_string()
        } else {
            format!("{} (SSH)", self.ssh)
        }
    }
}

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// Where.
    pub host: SavedHost,
    /// A token typed or pasted (empty: read `host.token_file`).
    pub token: String,
}

/// The connect window's fields.
#[derive(Debug, Default)]
pub struct ConnectUi {
    /// Shown?
    pub open: bool,
    url: String,
    ssh: bool,
    ssh_dest: String,
    token: String,
    token_file: String,
    /// The last attempt's error, shown in the window.
    pub error: Option<String>,
}

impl ConnectUi {
    /// Opens the window, filled from `host` when given.
    pub(crate) fn show(&mut self, host: Option<&SavedHost>) {
        self.open = true;
        self.error = None;
        if self.url.is_empty() {
            self.url = format!("http://{}", crate::link::DEFAULT_LISTEN);
        }
        if self.token_file.is_empty() {
            // A local agent's token where `--connect` finds it: agent.token beside the settings.
            self.token_file = crate::link::token::default_path_if_there()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
        }
        if let Some(h) = host {
            self.url = h.url.clone();
            self.ssh = !h.ssh.is_empty();
            self.ssh_dest = h.ssh.clone();
            self.token_file = h.token_file.clone();
        }
    }

    /// Opens the window for `host`, whose agent refused the token given: it asks for the
    /// right one.
    pub(crate) fn ask_token(&mut self, host: &SavedHost) {
        self.show(Some(host));
        self.token.clear();
        self.error = Some(REFUSED_TOKEN.into());
    }

    /// Draws the window; returns a request when the user pressed Connect.
    pub(crate) fn window(&mut self, ctx: &egui::Context) -> Option<ConnectRequest> {
        if !self.open {
            return None;
        }
        let mut out = None;
        let mut open = self.open;
        egui::Window::new("Connect to host")
            .open(&mut open)
            .collapsible(false)
            .resizable(false)
            .min_width(480.0)
            .default_pos(egui::pos2(200.0, 80.0))
            .show(ctx, |ui| {
                out = self.form(ui);
            });
        self.open = open && self.open;
        out
    }

    /// The form: over SSH or not, the agent's address, the token, the error of the last
    /// try, Connect and Cancel; what Connect asks for, once its fields are valid.
    fn form(&mut self, ui: &mut Ui) -> Option<ConnectRequest> {
        super::widgets::label_with_code(
            ui,
            "Attach this window to `vramwarden agent` on a GPU server: its GPUs, processes, leaks and actions, under the agent's own policy.",
        );
        ui.add_space(6.0);
        ui.checkbox(
            &mut self.ssh,
            "Over SSH (the window runs ssh -N -L … itself)",
        );
        egui::Grid::new("connect-form")
            .num_columns(2)
            .spacing([10.0, 6.0])
            .show(ui, |ui| {
                self.address_rows(ui);
                self.token_rows(ui);
            });
        if let Some(e) = &self.error {
            ui.add(egui::Label::new(RichText::new(e).color(widgets::warn(ui))).wrap());
        }
        ui.add_space(6.0);
        self.buttons(ui)
    }

    /// The form's address rows: the SSH destination and the agent's address on that host, or
    /// the agent's address.
    fn address_rows(&mut self, ui: &mut Ui) {
        if self.ssh {
            let l = ui.label("SSH destination");
            ui.add(
                egui::TextEdit::singleline(&mut self.ssh_dest)
                    .hint_text("user@gpu-server")
                    .desired_width(300.0),
            )
            .labelled_by(l.id);
            ui.end_row();
            let l = ui.label("Agent on that host");
            ui.add(egui::TextEdit::singleline(&mut self.url).desired_width(300.0))
                .labelled_by(l.id)
                .on_hover_text(
                    "The agent's address as seen on the server (its --listen, loopback by default)",
                );
            ui.end_row();
        } else {
            let l = ui.label("Agent address");
            ui.add(
                egui::TextEdit::singleline(&mut self.url)
                    .hint_text("http://127.0.0.1:8726")
                    .desired_width(300.0),
            )
            .labelled_by(l.id);
            ui.end_row();
        }
    }

    /// The form's token rows: the token itself (hidden, not saved), or a token file.
    fn token_rows(&mut self, ui: &mut Ui) {
        let l = ui.label("Token");
        ui.add(
            egui::TextEdit::singleline(&mut self.token)
                .password(true)
                .hint_text("paste the agent's token (not saved)")
                .desired_width(300.0),
        )
        .labelled_by(l.id);
        ui.end_row();
        let l = ui.label("or token file");
        ui.add(
            egui::TextEdit::singleline(&mut self.token_file)
                .hint_text("~/.config/vramwarden/gpu-server.token")
                .desired_width(300.0),
        )
        .labelled_by(l.id)
        .on_hover_text(
            "A local copy of the agent's agent.token (mode 0600); its path is remembered",
        );
        ui.end_row();
    }

    /// Connect (the request, when the fields are valid; else their error is kept) and Cancel.
    fn buttons(&mut self, ui: &mut Ui) -> Option<ConnectRequest> {
        let mut out = None;
        ui.horizontal(|ui| {
            if ui.button("Connect").clicked() {
                match self.request() {
                    Ok(r) => out = Some(r),
                    Err(e) => self.error = Some(e),
                }
            }
            if ui.button("Cancel").clicked() {
                self.open = false;
            }
        });
        out
    }

    /// The connection the fields ask for (trimmed), or why they are not valid.
    fn request(&self) -> Result<ConnectRequest, String> {
        let host = SavedHost {
            url: self.url.trim().to_string(),
            ssh: if self.ssh {
                self.ssh_dest.trim().to_string()
            } else {
                String::new()
            },
            token_file: self.token_file.trim().to_string(),
        };
        validate(&host, &self.token)?;
        Ok(ConnectRequest {
            host,
            token: self.token.trim().to_string(),
        })
    }
}

/// What the connect window says when it opens for an agent that refused the token.
pub const REFUSED_TOKEN: &str =
    "The agent refused this token: paste its token (the agent's agent.token), or name a file holding it, and connect again.";

/// What can be checked before trying: the address, the SSH destination, a token source.
///
/// # Errors
/// A sentence for the window.
pub(crate) fn validate(host: &SavedHost, token: &str) -> Result<(), String> {
    crate::link::remote::parse_url(&host.url)?;
    if !host.ssh.is_empty() && (host.ssh.starts_with('-') || host.ssh.contains(char::is_whitespace))
    {
        return Err("the SSH destination is user@host (no spaces, no options)".into());
    }
    if token.trim().is_empty() && host.token_file.trim().is_empty() {
        return Err("the agent needs its token: paste it or name a file holding it".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_before_anything_runs() {
        let h = SavedHost {
            url: "http://127.0.0.1:8726".into(),
            ssh: String::new(),
            token_file: String::new(),
        };
        assert!(validate(&h, "abc").is_ok());
        assert!(validate(&h, " ").expect_err("no token").contains("token"));
        let ssh = SavedHost {
            ssh: "-oProxyCommand=evil".into(),
            ..h.clone()
        };
        assert!(validate(&ssh, "abc").is_err());
        let bad = SavedHost {
            url: "ftp://x".into(),
            ..h
        };
        assert!(validate(&bad, "abc").is_err());
    }
}
