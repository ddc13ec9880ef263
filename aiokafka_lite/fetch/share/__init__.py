"""The fetch side of a KIP-932 share group member: ShareFetch per leader and ShareAcknowledge
(fetcher.py), one share session per leader broker (session.py), the acknowledgement ledger
(ledger.py), the acquired records and ShareRecord (records.py), the acquired records waiting to be
handed out (buffer.py), and the request bodies and their answers (requests.py)."""
