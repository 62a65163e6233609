//! Menus and keys: the row menu's copies, F1, Ctrl+Q.

use super::*;

fn copied(h: &Harness<'static, VramApp>) -> Vec<String> {
    h.output()
        .platform_output
        .commands
        .iter()
        .filter_map(|c| match c {
            egui::OutputCommand::CopyText(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// Issue 40: the row menu copies the PID and the command line.
#[test]
fn the_row_menu_copies_the_pid_and_the_command_line() {
    let mut h = harness(demo_app(120));
    h.run();
    row_menu(&mut h, "51877");
    h.get_by_label("Copy PID").click();
    h.step();
    assert_eq!(copied(&h), vec!["51877".to_string()]);
    h.run();
    row_menu(&mut h, "51877");
    h.get_by_label("Copy command line").click();
    h.step();
    let cmd = copied(&h);
    assert_eq!(cmd.len(), 1, "{cmd:?}");
    assert!(
        cmd[0].starts_with("python3 ") && cmd[0].len() > 10,
        "{cmd:?}"
    );
}

/// Issue 40: F1 opens the keyboard shortcuts; the File menu shows Ctrl+Q, the shortcut
/// egui closes the window on.
#[test]
fn f1_shows_the_shortcuts_and_ctrl_q_quits() {
    let mut h = harness(demo_app(60));
    h.run();
    assert!(h.query_by_label("Ctrl+Q").is_none());
    h.key_press(egui::Key::F1);
    h.run();
    h.get_by_label("Ctrl+Q");
    h.get_by_label("F1");

    let mut h = harness(demo_app(60));
    h.run();
    h.get_by_label("File").click();
    h.run();
    h.get_by_label_contains("Quit");
    assert!(
        h.query_all_by_label_contains("Ctrl+Q").count() > 0,
        "the menu shows the shortcut"
    );
    // The shortcut shown is the one egui closes the window on.
    let quit = vramwarden::front::gui::app::QUIT_SHORTCUT;
    assert!(h.ctx.options(|o| o.quit_shortcuts.contains(&quit)));
}

/// Issue 40: a theme previewed in Settings goes away with Revert and with Esc (closing
/// without saving), not only with the window's ✖.
#[test]
fn a_previewed_theme_is_undone_by_revert_and_by_esc() {
    let pref = |h: &Harness<'static, VramApp>| h.ctx.options(|o| o.theme_preference);
    let mut h = harness(demo_app(60));
    h.run();
    // The settings' theme (the default: follow the desktop).
    let saved = egui::ThemePreference::System;
    for undo in ["Revert", "Esc"] {
        h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Comma);
        h.run();
        h.get_by_label("Light").click();
        h.run();
        assert_eq!(pref(&h), egui::ThemePreference::Light, "previewed");
        if undo == "Revert" {
            h.get_by_label("Revert").click();
        } else {
            h.key_press(egui::Key::Escape);
        }
        h.run();
        assert_eq!(pref(&h), saved, "after {undo}");
        h.key_press(egui::Key::Escape);
        h.run();
    }
}

/// Issue 40: in a session the graph's hint and button speak of the slider, not of "live".
#[test]
fn a_session_graph_speaks_of_the_slider_not_live() {
    let (_dir, h) = recorded_session_harness(300);
    h.get_by_label_contains("double-click: back to the slider");
    assert!(h.query_by_label_contains("follow live").is_none());
    let mut h = harness(demo_app(60));
    h.run();
    h.get_by_label_contains("double-click: follow live");
}

/// Issue 40: the forecast's warning time (`notifications.oom_forecast_minutes`) is in
/// Settings → Leaks, kept within 0 … 1440 min with a word.
#[test]
fn the_forecast_warning_time_is_in_settings() {
    let mut h = harness(demo_app(60));
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Comma);
    h.run();
    h.get_all_by_label("Leaks")
        .last()
        .expect("the section")
        .click();
    h.run();
    h.get_by_label("Warn when a GPU is forecast full within");
    let field = h
        .get_all_by_role(egui::accesskit::Role::SpinButton)
        .last()
        .expect("the warning time field");
    field.set_value_accesskit(2000.0);
    h.run();
    assert_eq!(
        h.state()
            .settings_ui
            .draft
            .notifications
            .oom_forecast_minutes,
        1440.0
    );
    h.get_by_label_contains("Forecast warning: 2000 min is over the most allowed, set to 1440 min");
}

/// Issue 41: a menu click becomes one `UiCommand`, carried out at the end of the frame it was
/// clicked in, and only once.
#[test]
fn a_menu_click_is_one_command_carried_out_once_in_its_frame() {
    use vramwarden::front::gui::app::UiCommand;
    let mut h = harness(demo_app(60));
    h.run();
    h.get_by_label("File").click();
    h.run();
    assert!(!h.state().settings_ui.open);
    h.get_by_label_contains("Settings…").click();
    h.step();
    assert_eq!(h.state().last_commands(), &[UiCommand::OpenSettings]);
    assert!(
        h.state().settings_ui.open,
        "carried out in the click's frame"
    );
    h.step();
    assert_eq!(h.state().last_commands(), &[] as &[UiCommand], "not again");
    assert!(h.state().settings_ui.open);
}

/// Issue 41: the row menu's Terminate… is a request (not an out-parameter): the one command
/// asked, and its confirmation open by the end of the same frame.
#[test]
fn the_row_menu_asks_through_the_queue_and_the_confirmation_opens() {
    use vramwarden::front::gui::app::UiCommand;
    let mut h = harness(demo_app(60));
    h.run();
    row_menu(&mut h, "51877");
    assert!(h.state().confirm.is_none());
    h.get_by_label("Terminate…").click();
    h.step();
    match h.state().last_commands() {
        [UiCommand::AskAction(key, vramwarden::act::rules::Action::Terminate { .. })] => {
            assert_eq!(key.0.pid, 51877);
        }
        other => panic!("{other:?}"),
    }
    let asked = h.state().confirm.clone().expect("the confirmation is open");
    assert_eq!(asked.target.name(), "python3");
}

/// The review of the window: the shortcuts' list said "Ctrl+1 / 2 / 3" though Ctrl+4 opens
/// the Guard tab, and the File menu said "Ctrl+Comma" where the list says "Ctrl+,".
#[test]
fn the_shortcuts_list_and_the_file_menu_agree_with_the_keys() {
    let mut h = harness(demo_app(60));
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Num4);
    h.run();
    assert_eq!(
        h.state().state.bottom,
        vramwarden::front::gui::ui_state::BottomTab::Guard,
        "Ctrl+4 opens the Guard tab"
    );
    h.key_press(egui::Key::F1);
    h.run();
    h.get_by_label("Ctrl+1 / 2 / 3 / 4");
    h.get_by_label("Processes, Leaks, Activity, Guard tab");
    h.get_by_label("Ctrl+,");
    h.key_press(egui::Key::Escape);
    h.run();
    h.get_by_label("File").click();
    h.run();
    assert!(
        h.query_all_by_label_contains("Ctrl+Comma").next().is_none(),
        "the menu spells the shortcut otherwise than the list"
    );
    assert!(
        h.query_all_by_label_contains("Ctrl+,").next().is_some(),
        "the menu shows Ctrl+,"
    );
}
