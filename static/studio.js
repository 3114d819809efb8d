// The review step: mint the request id, freeze the body, submit exactly that; safe to resend.
(function () {
  "use strict";

  // What the script says, in the page's language: base.html gives the words (#words, made
  // through the catalogue); English where a page has none. "{name}" is filled in here.
  var WORDS = null;
  function word(key, english, values) {
    if (WORDS === null) {
      var given = document.getElementById("words");
      try { WORDS = given ? JSON.parse(given.textContent) : {}; } catch (e) { WORDS = {}; }
    }
    var text = typeof WORDS[key] === "string" ? WORDS[key] : english;
    Object.keys(values || {}).forEach(function (name) {
      text = text.split("{" + name + "}").join(String(values[name]));
    });
    return text;
  }

  function mintId() {
    if (window.crypto && typeof crypto.randomUUID === "function") {
      return crypto.randomUUID();
    }
    // Plain http on a LAN address is not a secure context: build a v4 UUID by hand.
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    var hex = Array.prototype.map.call(bytes, function (b) {
      return (b + 0x100).toString(16).slice(1);
    }).join("");
    return hex.slice(0, 8) + "-" + hex.slice(8, 12) + "-" + hex.slice(12, 16) + "-" +
      hex.slice(16, 20) + "-" + hex.slice(20);
  }

  function isReload() {
    var nav = performance.getEntriesByType && performance.getEntriesByType("navigation")[0];
    return !!nav && (nav.type === "reload" || nav.type === "back_forward");
  }

  // Storage can be off (private modes, policies): then the id lives as long as the page.
  function storage() {
    try { return window.sessionStorage; } catch (error) { return null; }
  }

  // One review step keeps its id across reloads; a new step mints a new one.
  function frozenRequest(review) {
    var key = "studio.review:" + location.pathname + location.search;
    var store = storage();
    var kept = store && store.getItem(key);
    var body = JSON.parse(review.dataset.frozen);
    if (kept && isReload()) {
      // The same step reloaded keeps its id, unless what it shows has changed since.
      var old = JSON.parse(kept);
      var was = Object.assign({}, old);
      delete was.request_id;
      if (JSON.stringify(was) === JSON.stringify(body)) { return Object.freeze(old); }
    }
    body.request_id = mintId();
    var frozen = Object.freeze(body);
    try {
      if (store) { store.setItem(key, JSON.stringify(frozen)); }
    } catch (error) {
      // Quota full: the id still holds while this page is open.
    }
    return frozen;
  }

  var SUBMIT_TIMEOUT_MS = 15000;

  function startReview(review) {
    var frozen = frozenRequest(review);
    var text = JSON.stringify(frozen);
    var button = document.getElementById("submit");
    var status = document.getElementById("submit-status");
    document.getElementById("request-id").textContent = frozen.request_id;
    document.getElementById("frozen-body").textContent = JSON.stringify(frozen, null, 2);
    review.dataset.requestId = frozen.request_id;
    button.disabled = false;
    // A review that asks the person to confirm something (the tax) sends only once ticked,
    // and then says so in the body (`confirm_tax: true`); the request id stays the same.
    var confirm = review.querySelector("input[data-confirms]");
    if (confirm) {
      var confirmed = function () {
        var body = Object.assign({}, frozen);
        body[confirm.name] = confirm.checked;
        text = JSON.stringify(body);
        document.getElementById("frozen-body").textContent = JSON.stringify(body, null, 2);
        button.disabled = !confirm.checked;
      };
      confirm.addEventListener("change", confirmed);
      confirmed();
    }

    button.addEventListener("click", function () {
      button.disabled = true;
      status.className = "status";
      status.textContent = word("submitting", "Submitting…");
      var controller = new AbortController();
      var timer = setTimeout(function () { controller.abort(); }, SUBMIT_TIMEOUT_MS);
      fetch(review.dataset.action || "/leases", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Accept": "application/json" },
        body: text,
        credentials: "same-origin",
        signal: controller.signal,
      }).then(function (reply) {
        return reply.json().catch(function () { return {}; }).then(function (data) {
          if (reply.ok && data.lease_id) {
            status.textContent = word("submitted", "Submitted. Opening the suggestions…");
            location.assign("/leases/" + data.lease_id);
            return;
          }
          if (reply.ok && data.number) {
            // The review step is done: the address is the invoice's at once, and Back or
            // Reload finds the invoice, not the step that issued it.
            var issued = "/invoices/" + data.invoice_id;
            history.replaceState(history.state, "", issued);
            status.textContent = word("issued_as", "Issued as {number}.", { number: data.number });
            button.textContent = word("issued", "Issued");
            review.dataset.number = data.number;
            setTimeout(function () { location.replace(issued); }, 800);
            return;
          }
          if (reply.status === 401) {
            location.assign("/login?next=" + encodeURIComponent(location.pathname + location.search));
            return;
          }
          status.className = "status error";
          status.textContent = data.message ||
            word("answered", "The studio answered {status}.", { status: reply.status });
          button.disabled = reply.status >= 400 && reply.status < 500 && reply.status !== 503;
          if (button.disabled) { return; }
          button.textContent = review.dataset.again || word("submit_again", "Submit again");
        });
      }, function () {
        status.className = "status error";
        status.textContent = word("no_reply_submit", "No reply - submit again; it is safe. The same request is sent, so nothing is made twice.");
        button.textContent = review.dataset.again || word("submit_again", "Submit again");
        button.disabled = false;
      }).finally(function () { clearTimeout(timer); });
    });
  }

  // Attachments: the key is minted when the file is chosen, and a resend after a lost reply
  // sends the same key and the same bytes, so the file is attached once.
  var UPLOAD_TIMEOUT_MS = 120000;

  function startAttach(section) {
    var input = document.getElementById("attach-file");
    var again = document.getElementById("attach-again");
    var status = document.getElementById("attach-status");
    var bar = document.getElementById("attach-progress");
    var barLabel = document.getElementById("attach-progress-label");
    var pending = null;

    function say(text, bad) {
      status.className = bad ? "status error" : "status";
      status.textContent = text;
    }

    function send() {
      if (!pending) { return; }
      var form = new FormData();
      form.append("client_key", pending.key);
      form.append("file", pending.file, pending.file.name);
      var xhr = new XMLHttpRequest();
      xhr.open("POST", section.dataset.action);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.timeout = UPLOAD_TIMEOUT_MS;
      xhr.upload.onprogress = function (event) {
        if (event.lengthComputable) { bar.value = Math.round(100 * event.loaded / event.total); }
      };
      again.hidden = true;
      input.disabled = true;
      bar.value = 0;
      barLabel.hidden = false;
      say(word("sending", "Sending {name}…", { name: pending.file.name }));
      xhr.onload = function () {
        var data = {};
        try { data = JSON.parse(xhr.responseText); } catch (error) { data = {}; }
        input.disabled = false;
        if (xhr.status === 401) {
          location.assign("/login?next=" + encodeURIComponent(location.pathname));
          return;
        }
        if (xhr.status >= 200 && xhr.status < 300) {
          say(word("attached", "Attached {name}.", { name: data.filename }));
          section.dataset.lastKey = pending.key;
          pending = null;
          input.value = "";
          barLabel.hidden = true;
          htmx.ajax("GET", section.dataset.action, { target: "#attachment-list", swap: "innerHTML" });
          return;
        }
        say(data.message || word("answered", "The studio answered {status}.", { status: xhr.status }), true);
        barLabel.hidden = true;
        again.hidden = xhr.status < 500;
        if (xhr.status < 500) { pending = null; input.value = ""; }
      };
      xhr.onerror = xhr.ontimeout = function () {
        input.disabled = false;
        barLabel.hidden = true;
        say(word("no_reply_send", "No reply - send again; it is safe. The same file goes with the same key, so it is attached once."), true);
        again.hidden = false;
      };
      xhr.send(form);
    }

    function sameFile(a, b) {
      return a.name === b.name && a.size === b.size && a.lastModified === b.lastModified;
    }

    input.addEventListener("change", function () {
      if (!input.files.length) { return; }
      var file = input.files[0];
      // The same file chosen again after a lost reply keeps its key: it is attached once.
      var key = pending && sameFile(pending.file, file) ? pending.key : mintId();
      pending = { key: key, file: file };
      section.dataset.key = pending.key;
      send();
    });
    again.addEventListener("click", send);
  }

  // Keep the person's choice of candidates while polling replaces the list.
  var chosen = {};
  document.addEventListener("change", function (event) {
    var input = event.target;
    if (input.matches && input.matches("input[type=radio][name^='choice:']")) {
      chosen[input.name] = input.value;
    }
  });

  function isPoll(element) {
    return !!element && element.id === "lease-status";
  }

  // What the page asks by itself (polls, the totals while typing) is not the person acting.
  function isBackground(element) {
    return isPoll(element) || (!!element && !!element.closest && !!element.closest("[data-background]"));
  }

  // A person's own action replaces old messages; a background request must not hide them.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var messages = document.getElementById("messages");
    if (messages && !isBackground(event.detail.elt)) { messages.innerHTML = ""; }
  });

  function say(text, code) {
    var messages = document.getElementById("messages");
    if (!messages) { return; }
    var line = document.createElement("p");
    line.className = "message error";
    line.dataset.code = code;
    line.textContent = text;
    messages.replaceChildren(line);
  }

  document.addEventListener("htmx:sendError", function (event) {
    if (resendsSame(event.detail.elt)) { return; }  // it says so beside its own button
    if (isPoll(event.detail.elt)) {
      // A poll that went unanswered must not hide what the person's own action was told.
      var messages = document.getElementById("messages");
      if (messages && messages.querySelector(":scope > :not([data-code=no_reply])")) { return; }
      say(word("no_reply_polling", "No reply from the studio. The page keeps asking; nothing is lost."), "no_reply");
    } else {
      say(word("no_reply_try", "No reply from the studio. Try again; it is safe."), "no_reply");
    }
  });
  document.addEventListener("htmx:responseError", function (event) {
    say(word("answered_later", "The studio answered {status}. Try again in a moment.",
             { status: event.detail.xhr.status }),
      "server_error");
  });

  // Status changes are announced once, from a live region that polling never replaces.
  var lastStatus = null;
  function announce() {
    var lease = document.getElementById("lease-status");
    var announcer = document.getElementById("lease-announcer");
    if (!lease || !announcer) { return; }
    if (lastStatus !== null && lastStatus !== lease.dataset.status) {
      announcer.textContent = lease.querySelector(".status").textContent.trim();
    }
    lastStatus = lease.dataset.status;
  }

  document.addEventListener("htmx:afterSwap", function (event) {
    Object.keys(chosen).forEach(function (name) {
      document.querySelectorAll("input[type=radio]").forEach(function (input) {
        if (input.name === name && input.value === chosen[name]) { input.checked = true; }
      });
    });
    var messages = document.getElementById("messages");
    var stale = messages && messages.querySelector("[data-code=no_reply]");
    if (stale && isPoll(event.detail.requestConfig && event.detail.requestConfig.elt)) {
      messages.innerHTML = "";
    }
    announce();
    tick();
    showLocalTimes();
  });

  // A moment reads in the person's own time zone, as their clock shows it; dates stay dates.
  var localMoment = window.Intl && Intl.DateTimeFormat
    ? new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" }) : null;

  function showLocalTimes(root) {
    if (!localMoment) { return; }
    (root || document).querySelectorAll("time[data-local]").forEach(function (element) {
      var at = new Date(element.getAttribute("datetime"));
      if (isNaN(at.getTime())) { return; }
      element.textContent = localMoment.format(at);
      element.title = at.toISOString().slice(0, 16).replace("T", " ") + " UTC";
      element.removeAttribute("data-local");
    });
  }

  function tick() {
    document.querySelectorAll("[data-countdown]").forEach(function (element) {
      var left = Math.round((Date.parse(element.dataset.countdown) - Date.now()) / 1000);
      element.textContent = left > 0 ? left + " s left" : "no time left";
    });
  }

  function mintKey(input) {
    return (input.form ? input.form.getAttribute("action") : "") + " " + input.name;
  }

  // A form that creates something carries one id per visit to it, kept in this history
  // entry's state: Back, Forward and Reload find the same id, so Save again answers the
  // record the first Save made; a new visit is a new entry and mints a new id. Without
  // script the id the server put in the form is used.
  function keepMinted() {
    var inputs = document.querySelectorAll("input[data-mint]");
    if (!inputs.length) { return; }
    var state = Object.assign({}, history.state);
    var minted = Object.assign({}, state.minted);
    inputs.forEach(function (input) {
      var key = mintKey(input);
      if (minted[key]) {
        input.value = minted[key];
      } else {
        input.value = input.value || mintId();
        minted[key] = input.value;
      }
    });
    state.minted = minted;
    try {
      history.replaceState(state, "");
    } catch (error) {
      // A state too large or refused: the id still holds while this page is open.
    }
  }

  // A form that records something once (a payment) is, after a lost reply, the review step
  // again: its fields freeze as they were sent and its button sends exactly that body with
  // the same id, so the studio counts it once. "Start over" is a new form with a new id.
  function resendsSame(element) {
    return !!element && !!element.matches && element.matches("form[data-resend-same]");
  }

  function amountText(value, decimals) {
    // Digits as the person typed them, padded to the currency's decimals; never a float.
    var match = /^(\d+)(?:\.(\d*))?$/.exec(value.trim());
    if (!match || decimals === "" || (match[2] || "").length > Number(decimals)) { return value; }
    var cents = (match[2] || "") + "0".repeat(Number(decimals));
    return match[1] + (Number(decimals) ? "." + cents.slice(0, Number(decimals)) : "");
  }

  function sayInForm(form, text) {
    var status = form.querySelector("[data-resend-status]");
    status.className = "status error";
    status.textContent = text;
    form.querySelector("[data-start-over]").hidden = false;
  }

  function freeze(form, entries) {
    form.frozenEntries = entries;
    form.querySelectorAll("input, textarea").forEach(function (field) { field.readOnly = true; });
    form.querySelectorAll("select").forEach(function (field) { field.disabled = true; });
    var sent = {};
    entries.forEach(function (pair) { sent[pair[0]] = pair[1]; });
    sayInForm(form, form.dataset.lostReply.replace("{amount}",
      amountText(String(sent.amount || ""), form.dataset.decimals || "")));
    form.querySelector("button[type=submit]").textContent = form.dataset.again;
  }

  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (!resendsSame(form) || !form.frozenEntries) { return; }
    var body = new FormData();
    form.frozenEntries.forEach(function (pair) { body.append(pair[0], pair[1]); });
    event.detail.parameters = body;
  });

  document.addEventListener("htmx:sendError", function (event) {
    var form = event.detail.elt;
    if (!resendsSame(form)) { return; }
    var sent = form.frozenEntries || Array.from(event.detail.requestConfig.formData.entries());
    freeze(form, sent);
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    var status = event.detail.xhr && event.detail.xhr.status;
    // The studio's own message is above the form; here only what to do next.
    if (resendsSame(form) && status >= 400 && status < 500 && status !== 401 &&
        (form.frozenEntries || status === 409)) {
      sayInForm(form, form.dataset.refused);
    }
  });

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("[data-start-over]");
    if (!link) { return; }
    event.preventDefault();
    // Forget this form's id in this history entry, so the reloaded page mints a new one.
    var state = Object.assign({}, history.state);
    var minted = Object.assign({}, state.minted);
    link.closest("form").querySelectorAll("input[data-mint]").forEach(function (input) {
      delete minted[mintKey(input)];
    });
    state.minted = minted;
    history.replaceState(state, "", link.href);
    location.reload();
  });

  // A refused form: each field's message beside its field, all at once; the page moves to the
  // first, and the button pressed says what happened. Fields are named as the studio names
  // them: `amount`, or `unit_price.2` for the second line's unit price.
  function fieldOf(form, key) {
    var match = /^(.+)\.(\d+)$/.exec(key);
    if (match) {
      var nth = form.querySelectorAll("[name='" + match[1] + "']")[Number(match[2]) - 1];
      if (nth) { return nth; }
    }
    var named = form.querySelectorAll("[name='" + key + "']");
    return named.length ? named[0] : null;
  }

  function clearFieldErrors(form) {
    form.querySelectorAll(".field-error").forEach(function (note) { note.remove(); });
    form.querySelectorAll("[aria-invalid=true]").forEach(function (field) {
      field.removeAttribute("aria-invalid");
      var kept = (field.getAttribute("aria-describedby") || "").split(" ").filter(function (id) {
        return id && id.indexOf("field-error-") !== 0;
      });
      if (kept.length) { field.setAttribute("aria-describedby", kept.join(" ")); }
      else { field.removeAttribute("aria-describedby"); }
    });
    form.querySelectorAll("[data-label-before]").forEach(function (button) {
      button.textContent = button.dataset.labelBefore;
      button.removeAttribute("data-label-before");
    });
  }

  var fieldErrorCount = 0;

  function placeFieldErrors(form, list, submitter) {
    clearFieldErrors(form);
    var first = null;
    list.querySelectorAll("[data-field]").forEach(function (item) {
      var field = fieldOf(form, item.dataset.field);
      if (!field || field.type === "hidden") { return; }
      var note = document.createElement("span");
      note.className = "field-error";
      note.id = "field-error-" + (++fieldErrorCount);
      note.dataset.for = item.dataset.field;
      note.textContent = item.textContent;
      field.insertAdjacentElement("afterend", note);
      field.setAttribute("aria-invalid", "true");
      field.setAttribute("aria-describedby",
        ((field.getAttribute("aria-describedby") || "") + " " + note.id).trim());
      item.hidden = true;  // said beside its field; what no field shows stays listed here
      // The first in the page's order, whatever order the studio named them in.
      if (!first || (field.compareDocumentPosition(first) & Node.DOCUMENT_POSITION_FOLLOWING)) {
        first = field;
      }
    });
    var button = submitter || form.querySelector("button[type=submit]");
    if (button && list.dataset.outcome) {
      button.dataset.labelBefore = button.dataset.labelBefore || button.textContent;
      button.textContent = list.dataset.outcome;
    }
    if (first) {
      first.scrollIntoView({ block: "center" });
      first.focus({ preventScroll: true });
    }
  }

  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail.target;
    var config = event.detail.requestConfig;
    var list = target && target.id === "messages" && target.querySelector("[data-field-errors]");
    var form = config && config.elt && config.elt.closest && config.elt.closest("form");
    if (!list || !form) { return; }
    var submitter = config.triggeringEvent && config.triggeringEvent.submitter;
    placeFieldErrors(form, list, submitter);
  });

  // Once the person changes the form, its button offers to save again.
  document.addEventListener("input", function (event) {
    var form = event.target.form || (event.target.closest && event.target.closest("form"));
    if (!form) { return; }
    form.querySelectorAll("[data-label-before]").forEach(function (button) {
      button.textContent = button.dataset.labelBefore;
      button.removeAttribute("data-label-before");
    });
  });

  // The person's next send starts clean: the form is judged afresh.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (elt && elt.matches && elt.matches("form") && !isBackground(elt)) { clearFieldErrors(elt); }
  });

  // Choosing a customer on a draft fills in their currency, and the due date from their
  // payment terms while it is still empty; both stay the person's to change.
  function daysFromToday(days) {
    var day = new Date();
    day.setDate(day.getDate() + Number(days));
    return day.getFullYear() + "-" + String(day.getMonth() + 1).padStart(2, "0") + "-" +
      String(day.getDate()).padStart(2, "0");
  }

  function fillFromCustomer(picker) {
    var form = picker.closest("form");
    var said = document.getElementById("customer-filled");
    if (!form || !said || !picker.dataset.pickedName) { return; }
    var filled = [];
    var currency = form.elements.namedItem("currency");
    var wanted = picker.dataset.pickedCurrency;
    if (currency && wanted && !currency.readOnly && currency.value !== wanted) {
      currency.value = wanted;
      filled.push(word("filled_currency", "currency {currency}", { currency: wanted }));
    }
    var due = form.elements.namedItem("due_date");
    var days = picker.dataset.pickedTermsDays;
    if (due && days && !due.value && !due.readOnly) {
      due.value = daysFromToday(days);
      filled.push(word("filled_due", "due {date} ({days} days)", { date: due.value, days: days }));
    }
    said.textContent = filled.length
      ? word("filled_from", "Filled in from {name}'s details: {filled}.",
             { name: picker.dataset.pickedName, filled: filled.join(", ") })
      : "";
    // The totals follow the currency.
    if (filled.length && currency) { currency.dispatchEvent(new Event("input", { bubbles: true })); }
  }

  document.addEventListener("htmx:load", function (event) {
    var picker = event.detail.elt;
    if (picker && picker.id === "customer-picker") { fillFromCustomer(picker); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    keepMinted();
    var review = document.getElementById("review");
    if (review) { startReview(review); }
    var attach = document.getElementById("attach");
    if (attach) { startAttach(attach); }
    announce();
    tick();
    showLocalTimes();
    setInterval(tick, 1000);
  });
})();
