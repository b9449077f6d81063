//! `policy_allow` through MCP: the agent asks, the user decides. The grant is recorded as a
//! request (asked by the MCP client); a client that supports form elicitation is asked to
//! confirm it with its user at once, naming what is granted (and, for a system directory or
//! credentials path, having the user type the path); the user's answer grants the request
//! or denies it. Otherwise, or when the user dismisses the question, the request waits for
//! a person on a terminal (`cairn policy allow W --request ID`).

use std::future::Future;

use cairn_engine::{Outcome, PolicyAllowOptions, PolicyOutcome, PolicyRevokeOptions, Request};
use camino::Utf8PathBuf;
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use serde_json::{Value, json};

use crate::error::Error;

/// What the agent gets back: the outcome of a verb, or the error, as JSON; and whether it is
/// a tool error.
pub type ToolAnswer = (Value, bool);

/// Runs `options` (an agent's `policy_allow`) as a request, then asks the user through
/// `peer` where the client can; `perform` runs an engine request where the store is.
pub async fn policy_allow<F, Fut>(
    options: PolicyAllowOptions,
    peer: &Peer<RoleServer>,
    perform: F,
) -> ToolAnswer
where
    F: Fn(Request) -> Fut,
    Fut: Future<Output = Result<Outcome, Error>>,
{
    // The client names itself: kept to what a request's `by` holds.
    let by: String = match peer.peer_info() {
        Some(info) => format!(
            "MCP client {} {}",
            info.client_info.name, info.client_info.version
        ),
        None => "an MCP client".to_owned(),
    }
    .chars()
    .scan(0, |bytes, c| {
        *bytes += c.len_utf8();
        (*bytes <= cairn_engine::MAX_ASKER).then_some(c)
    })
    .collect();
    let asked = match options.into_request(by) {
        Ok(asked) => asked,
        Err(e) => return failed(&e),
    };
    let recorded = match perform(Request::PolicyRequest(asked)).await {
        Ok(Outcome::PolicyRequest(o)) => o,
        Ok(other) => return (other.to_json(), false),
        Err(e) => return failed(&e),
    };
    let Some(id) = recorded.requested else {
        return outcome(&recorded);
    };
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return outcome(&recorded);
    }
    let Some(request) = recorded.requests.iter().find(|r| r.id == id) else {
        return outcome(&recorded);
    };
    let home = std::env::var_os("HOME").and_then(|h| std::fs::canonicalize(h).ok());
    let sensitive: Vec<(Utf8PathBuf, path_policy::Sensitive)> = request
        .grant
        .writable
        .iter()
        .filter_map(|p| {
            path_policy::sensitive(p.as_std_path(), home.as_deref()).map(|s| (p.clone(), s))
        })
        .collect();
    let (message, schema) = question(&recorded, id, &sensitive);
    let Ok(schema) = ElicitationSchema::from_json_schema(schema) else {
        return outcome(&recorded);
    };
    let asked = peer
        .create_elicitation(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        })
        .await;
    let worktree = recorded.worktree.clone();
    let answer = match asked {
        Ok(answer) => answer,
        // The client could not ask: the request waits for a person.
        Err(e) => {
            tracing::debug!("elicitation failed: {e}");
            return outcome(&recorded);
        }
    };
    let content = answer.content.unwrap_or(Value::Null);
    let granted = answer.action == ElicitationAction::Accept
        && content["grant"] == Value::Bool(true)
        && sensitive.iter().enumerate().all(|(i, (path, _))| {
            content[format!("confirm_{}", i + 1)].as_str() == Some(path.as_str())
        });
    match answer.action {
        // Dismissed without a choice: the request stays for a person to decide.
        ElicitationAction::Cancel => outcome(&recorded),
        _ if granted => {
            let grant = Request::PolicyAllow(PolicyAllowOptions {
                worktree,
                request: Some(id),
                yes: true,
                confirm: sensitive.into_iter().map(|(p, _)| p).collect(),
                reason: Some("confirmed by the user through MCP elicitation".into()),
                ..PolicyAllowOptions::default()
            });
            match perform(grant).await {
                Ok(done) => (done.to_json(), false),
                Err(e) => failed(&e),
            }
        }
        _ => {
            let deny = Request::PolicyRevoke(PolicyRevokeOptions {
                worktree: worktree.clone(),
                request: Some(id),
                ..PolicyRevokeOptions::default()
            });
            let mut body = match perform(deny).await {
                Ok(done) => done.to_json(),
                Err(e) => return failed(&e),
            };
            body["message"] = json!(format!(
                "{worktree}: the user declined request {id}; nothing was granted"
            ));
            (body, true)
        }
    }
}

/// What the user is asked: the message naming what is granted, and the form: `grant`, and
/// for each sensitive path a field it must be typed into.
fn question(
    recorded: &PolicyOutcome,
    id: u64,
    sensitive: &[(Utf8PathBuf, path_policy::Sensitive)],
) -> (String, serde_json::Map<String, Value>) {
    let request = recorded.requests.iter().find(|r| r.id == id);
    let mut message = String::new();
    if let Some(r) = request {
        let runs = if r.once {
            "the next `cairn run`"
        } else {
            "every later `cairn run`"
        };
        message.push_str(&format!(
            "The agent asks to let {runs} of {} ",
            recorded.worktree
        ));
        let mut what: Vec<String> = r
            .grant
            .writable
            .iter()
            .map(|p| format!("write beneath {p}"))
            .collect();
        if r.grant.network {
            what.push("use the network (TCP bind and connect)".into());
        }
        message.push_str(&what.join(" and "));
        message.push('.');
        if let Some(reason) = &r.reason {
            message.push_str(&format!(" Its reason: {reason}"));
        }
    }
    for (path, why) in sensitive {
        message.push_str(&format!(
            " {path} reaches {why}: type the path to grant it."
        ));
    }
    message.push_str(" Grant it?");
    let mut properties = serde_json::Map::new();
    properties.insert(
        "grant".into(),
        json!({ "type": "boolean", "title": "Grant", "description": "Grant what the agent asks", "default": false }),
    );
    let mut required = vec![json!("grant")];
    for (i, (path, _)) in sensitive.iter().enumerate() {
        let name = format!("confirm_{}", i + 1);
        properties.insert(
            name.clone(),
            json!({ "type": "string", "title": format!("Type {path} to confirm") }),
        );
        required.push(json!(name));
    }
    let mut schema = serde_json::Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), Value::Array(required));
    (message, schema)
}

fn outcome(o: &PolicyOutcome) -> ToolAnswer {
    (serde_json::to_value(o).unwrap_or(Value::Null), false)
}

fn failed(e: &Error) -> ToolAnswer {
    (crate::output::error_json(e), true)
}
