"""The ledger feed (docs/api.md#the-ledger-feed): its wire shapes and the one
watch of its end that every waiting consumer of an API process shares."""
