"""The invoices and the money: drafts, issuing, credit notes, customers, the seller's profile,
payments and balances, the documents (PDF, Factur-X), share links, exports and attachments."""
