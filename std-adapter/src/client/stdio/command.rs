//! How a stdio server is launched ([`ServerCommand`]): an absolute
//! executable path, arguments, a working directory and an explicit
//! environment. Nothing of this process's environment is passed on
//! unless asked ([`ServerCommand::pass_env`],
//! [`ServerCommand::inherit_env`]): a token belongs in the environment,
//! never in the arguments, which other users see in the process list.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

/// How to launch the server.
#[derive(Clone)]
pub struct ServerCommand {
    /// The executable: an absolute path.
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The child's environment: only these, plus what `pass_env` names or
    /// everything with `inherit_env`.
    pub env: Vec<(OsString, OsString)>,
    /// Variables of this process passed on by name (when set).
    pub pass_env: Vec<OsString>,
    /// Pass this process's whole environment on (off by default).
    pub inherit_env: bool,
    /// The child's working directory (this process's when `None`).
    pub current_dir: Option<PathBuf>,
}

impl fmt::Debug for ServerCommand {
    // Environment values may be secrets: their names only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("pass_env", &self.pass_env)
            .field("inherit_env", &self.inherit_env)
            .field("current_dir", &self.current_dir)
            .finish()
    }
}

impl ServerCommand {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            pass_env: Vec::new(),
            inherit_env: false,
            current_dir: None,
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn pass_env(mut self, key: impl Into<OsString>) -> Self {
        self.pass_env.push(key.into());
        self
    }

    pub fn inherit_env(mut self, inherit: bool) -> Self {
        self.inherit_env = inherit;
        self
    }

    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }
}
