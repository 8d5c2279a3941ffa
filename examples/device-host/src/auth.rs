//! The device app's bearer tokens: from the environment or a file, never
//! from the command line (which every user of the host sees in the process
//! list). Without one the app does not start, unless `--no-auth` says to
//! serve anyone who reaches it.

/// The environment variable that holds a token.
pub const TOKEN_ENV: &str = "MCPWIRE_DEVICE_TOKEN";

/// Where the tokens come from, as the arguments and the environment say.
#[derive(Debug, Default)]
pub struct Sources {
    /// The value of [`TOKEN_ENV`] (empty counts as unset).
    pub env: Option<String>,
    /// `--token-file FILE`.
    pub file: Option<String>,
    /// `--no-auth`.
    pub no_auth: bool,
}

/// The (token, principal) pairs every call must match one of; `None` with
/// `--no-auth`.
pub fn tokens(sources: &Sources) -> Result<Option<Vec<(String, String)>>, String> {
    let mut tokens = Vec::new();
    if let Some(t) = sources.env.as_deref().filter(|t| !t.is_empty()) {
        check(t).map_err(|e| format!("{TOKEN_ENV}: {e}"))?;
        tokens.push((t.to_owned(), "host".to_owned()));
    }
    if let Some(path) = &sources.file {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("--token-file {path}: {e}"))?;
        let before = tokens.len();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let token = words.next().unwrap_or_default();
            check(token).map_err(|e| format!("--token-file {path}: {e}"))?;
            let principal = words
                .next()
                .map_or_else(|| format!("token-{}", tokens.len() + 1), str::to_owned);
            tokens.push((token.to_owned(), principal));
        }
        if tokens.len() == before {
            return Err(format!("--token-file {path}: no token"));
        }
    }
    match (tokens.is_empty(), sources.no_auth) {
        (true, false) => Err(format!(
            "a bearer token is needed: set {TOKEN_ENV} or give --token-file FILE \
             (or --no-auth, which lets anyone on the network call the tools, toggle_output included)"
        )),
        (false, true) => Err("either a token or --no-auth, not both".into()),
        (true, true) => Ok(None),
        (false, false) => Ok(Some(tokens)),
    }
}

/// A token goes in an `authorization` header: visible ASCII, no spaces.
fn check(token: &str) -> Result<(), &'static str> {
    if token.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err("a token is visible ASCII without spaces")
    }
}
