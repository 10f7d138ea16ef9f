"""Who may do what: the authorizer as handlers use it, the ACL checks of each API, the audit trail."""
