"""The broker's part of tiered storage: uploads, expiry and reads below the local log start."""
