//! PJRT errors and events: turning a returned `PJRT_Error*` into an [`Error`] (reading its message and code,
//! destroying it exactly once), and awaiting and destroying `PJRT_Event`s.

use super::*;

impl Api {
    pub(super) fn missing(&self, function: &'static str) -> Error {
        Error::MissingFunction { function, plugin: self.path.display().to_string(), major: self.major, minor: self.minor }
    }

    /// Converts a returned `PJRT_Error*` (null: success) into a `Result`, destroying the error.
    pub(super) fn check(&self, err: *mut PJRT_Error, function: &'static str) -> Result<()> {
        if err.is_null() {
            return Ok(());
        }
        let (code, message) = self.take_error(err);
        Err(Error::Pjrt { function, code, message })
    }

    /// Reads message and code of `err` and destroys it.
    pub(super) fn take_error(&self, err: *mut PJRT_Error) -> (i32, String) {
        let mut message = String::from("(no message)");
        let mut code = 2;
        if let Ok(f) = slot!(self, PJRT_Error_Message) {
            let mut a = PJRT_Error_Message_Args::new();
            a.error = err;
            // SAFETY: `err` is a live error returned by this plugin; the message it returns lives as long as `err`,
            // and we copy it out before destroying `err` below.
            unsafe { f(&mut a) };
            // SAFETY: as above: (pointer, size) describe the error's message bytes while `err` is alive.
            message = unsafe { copy_str(a.message, a.message_size) };
        }
        if let Ok(f) = slot!(self, PJRT_Error_GetCode) {
            let mut a = PJRT_Error_GetCode_Args::new();
            a.error = err;
            // SAFETY: `err` is live; GetCode writes `code`. It may itself return an error, which we destroy.
            let e2 = unsafe { f(&mut a) };
            if e2.is_null() {
                code = a.code;
            } else {
                self.destroy_error(e2);
            }
        }
        self.destroy_error(err);
        (code, message)
    }

    pub(super) fn destroy_error(&self, err: *mut PJRT_Error) {
        if let Ok(f) = slot!(self, PJRT_Error_Destroy) {
            let mut a = PJRT_Error_Destroy_Args::new();
            a.error = err;
            // SAFETY: `err` is a live error owned by us, destroyed exactly once here.
            unsafe { f(&mut a) };
        }
    }

    /// Awaits `event`, then destroys it; returns the event's error, if any.
    pub(super) fn await_event(&self, event: *mut PJRT_Event, function: &'static str) -> Result<()> {
        if event.is_null() {
            return Ok(());
        }
        let mut a = PJRT_Event_Await_Args::new();
        a.event = event;
        let r = call!(self, PJRT_Event_Await, &mut a).map_err(|e| e.in_function(function));
        self.destroy_event(event);
        r
    }

    pub(super) fn destroy_event(&self, event: *mut PJRT_Event) {
        let mut a = PJRT_Event_Destroy_Args::new();
        a.event = event;
        let _ = call!(self, PJRT_Event_Destroy, &mut a);
    }
}

/// `p`, or the error `msg` when the plugin returned null for an object it reported as created.
pub(super) fn non_null<T>(p: *mut T, msg: &str) -> Result<*mut T> {
    if p.is_null() {
        return Err(Error::Invalid(msg.into()));
    }
    Ok(p)
}
