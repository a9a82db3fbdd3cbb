"""Review queues (issue 39, item 2): rollouts a filter of the browser selected, handed to reviewers one at a time with
their group around them, labeled by keyboard, the progress kept, the tallies shown at the end."""
