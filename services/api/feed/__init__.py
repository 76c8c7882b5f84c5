"""The ledger feed (docs/api.md#the-ledger-feed): its wire shapes. The one
watch of its end that a process's waiting consumers share is
services/api/feed_watch.py, which the API's context holds."""
