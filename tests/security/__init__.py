"""The attack suite: every trust boundary of docs/security.md attacked as a hostile submission, client or runner
would, in the deployed shape as far as this machine allows. Each test fails where the boundary does not hold."""
