# What became of a plan handed to the Body: the outcome kinds every link maps to its own answer.
#
# The Body says what happened; CODE alone turns a kind into a status code (HTTP's, which the
# JSON-lines link answers with too).
ACCEPTED = "accepted"  # submit: the plan is running; the object is its run.Run
REPORT = "report"  # execute: every step has its final status; the object is the report
PROBLEMS = "problems"  # readable but not runnable: {"problems": [...], "notes": [...]}
UNREADABLE = "unreadable"  # not one JSON text: {"problems": [why, with the byte offset]}
TOO_LARGE = "too_large"  # over plan.MAX_PLAN_BYTES, refused unread: {"problems": [why]}
CODE = {ACCEPTED: 200, REPORT: 200, PROBLEMS: 422, UNREADABLE: 400, TOO_LARGE: 413}

# A step's states, defined once; the final ones are the report's statuses (every link reads them here)
PENDING = "pending"
SENT = "sent"  # COMMAND on the wire, waiting for COMMAND_RESP
RUNNING = "running"  # continuous, answered 0, waiting for EVENT or max_duration_ms
DONE = "done"
STARTED = "started"
STOPPED = "stopped"
REFUSED = "refused"
TIMEOUT = "timeout"
OFFLINE = "offline"
SKIPPED = "skipped"
GOOD = (DONE, STARTED)
FINAL = (DONE, STARTED, STOPPED, REFUSED, TIMEOUT, OFFLINE, SKIPPED)
