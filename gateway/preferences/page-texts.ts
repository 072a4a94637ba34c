import Negotiator from "negotiator";

/** The page's own sentences: the operator configures every other string (decisions §3 texts). */
export interface PageTexts {
  /** The notice on the page right after a save. */
  saved: string;
  /** The same news in the page's title, before the operator's title. */
  savedTitle: string;
  /**
   * The link back to the settings page, on the page of a save that can be made again, and of a
   * visit that opening the link again can serve: over the rate limit, or meeting a failure of the
   * service's (briefly unavailable, or a fault to try again later).
   */
  openSettings: string;
  /** The link's last minute, as "HH:MM" in UTC. */
  validUntil(time: string): string;
  /**
   * Title and text of the page a visit gets for each failure code; `other` for any code not
   * listed. A save refused for one of these reasons gets them too, as its reason.
   */
  errors: Record<ErrorCode | "other", [title: string, text: string]>;
  /**
   * Title and text of the page a visit gets while the service is briefly unavailable (a 503 the
   * service expects to pass by itself, gateway/errors.ts isPassingOutage): to open the link again
   * in a moment. Any other failure of the service's is `errors.other`: try again later.
   */
  unavailable: [title: string, text: string];
  /**
   * The page of a save that was not made: its title, then why, for the failures after which the
   * visitor can save again from the page (it links back there). A save refused for a failure
   * only `errors` lists (a link that no longer works, a banner gone) gives that page's title and
   * text as its reason, and no link back.
   */
  notSaved: { title: string; because: Record<RetryableSaveFailure, string> };
}

/**
 * The failures a visit's page names. `link_retired`: a genuine link made before the identity key
 * was rotated (the visitor altered nothing; only a new choice gives a new link).
 */
export type ErrorCode =
  | "link_expired"
  | "link_invalid"
  | "link_retired"
  | "not_found"
  | "rate_limited";

/**
 * The failures of a save the page can make again: a submission the page's form never makes, each
 * named for what happened (`unsupported_form`, a 415: not the form, which is saved only as the
 * page itself sends it; `method_not_allowed`, a 405: another method than the form's; a 413,
 * `body_too_large`: more than the form ever sends; `invalid_request`, a 400: content or framing
 * that could not be read), or another site made (`not_from_the_page`), one over the rate limit,
 * and the service's own: `unavailable` (a 503 expected to pass by itself, the daemon or its store
 * out of reach: again in a moment) and `other` (a fault on the service's side: a 500, or a 503
 * that lasts until the operator acts, such as the daemon refusing a stand-alone gateway's token:
 * later).
 */
export type RetryableSaveFailure =
  | "unsupported_form"
  | "method_not_allowed"
  | "body_too_large"
  | "invalid_request"
  | "not_from_the_page"
  | "rate_limited"
  | "unavailable"
  | "other";

/**
 * The sentences in each language the page ships, English first (the fallback). A choice made in
 * one of these languages gets its page wholly in it when the banner has texts for that language;
 * an error page, which has no banner, follows the browser's Accept-Language.
 */
const PAGE_TEXTS: Record<string, PageTexts> = {
  en: {
    saved: "Your choices have been saved.",
    savedTitle: "Your choices have been saved",
    openSettings: "Open your privacy settings",
    validUntil: (time) => `This link works until ${time} UTC.`,
    errors: {
      link_expired: [
        "This link has expired",
        "Links to change your privacy choices work for 30 minutes after a choice. Open the site again and change your choices from its privacy settings.",
      ],
      link_invalid: [
        "This link is not valid",
        "It may have been copied incompletely or changed. Open the site again and change your choices from its privacy settings.",
      ],
      link_retired: [
        "This link is no longer valid",
        "Links made before a security update of this service no longer work. Open the site again and make your choice again from its banner or privacy settings.",
      ],
      not_found: [
        "These privacy settings are no longer available",
        "The site no longer collects choices with this banner.",
      ],
      rate_limited: [
        "Too many requests",
        "This service received too many requests from your connection in a short time. Wait a minute, then open this link again.",
      ],
      other: [
        "Something went wrong",
        "Something went wrong on this service’s side, not yours. Your privacy settings could not be shown just now. Please try again later.",
      ],
    },
    unavailable: [
      "Your privacy settings are briefly unavailable",
      "This service is briefly unavailable. Wait a moment, then open this link again.",
    ],
    notSaved: {
      title: "Your choices were not saved",
      because: {
        unsupported_form:
          "What was sent was not the form of the privacy settings page. Choices are saved only when that form is sent from the page itself. Open your privacy settings and save your choices there.",
        method_not_allowed:
          "This page saves your choices only through its own form. Open your privacy settings and save your choices there.",
        body_too_large:
          "What was sent was too large for the privacy settings form. Open your privacy settings and save your choices there.",
        invalid_request:
          "The content of the form that was sent was not valid. Open your privacy settings and save your choices there.",
        not_from_the_page:
          "Choices are saved only from the privacy settings page itself, so that another website cannot change them for you. Open your privacy settings and save your choices there.",
        rate_limited:
          "This service received too many requests from your connection in a short time. Wait a minute, then open your privacy settings and save your choices again.",
        unavailable:
          "This service is briefly unavailable. Wait a moment, then open your privacy settings and save your choices again.",
        other:
          "Something went wrong on this service’s side. Open your privacy settings and try again later.",
      },
    },
  },
  de: {
    saved: "Ihre Auswahl wurde gespeichert.",
    savedTitle: "Ihre Auswahl wurde gespeichert",
    openSettings: "Ihre Datenschutzeinstellungen öffnen",
    validUntil: (time) => `Dieser Link ist bis ${time} UTC gültig.`,
    errors: {
      link_expired: [
        "Dieser Link ist abgelaufen",
        "Links zum Ändern Ihrer Datenschutzauswahl sind nach einer Auswahl 30 Minuten lang gültig. Öffnen Sie die Website erneut und ändern Sie Ihre Auswahl in deren Datenschutzeinstellungen.",
      ],
      link_invalid: [
        "Dieser Link ist ungültig",
        "Er wurde möglicherweise unvollständig kopiert oder verändert. Öffnen Sie die Website erneut und ändern Sie Ihre Auswahl in deren Datenschutzeinstellungen.",
      ],
      link_retired: [
        "Dieser Link ist nicht mehr gültig",
        "Links, die vor einer Sicherheitsaktualisierung dieses Dienstes erstellt wurden, funktionieren nicht mehr. Öffnen Sie die Website erneut und treffen Sie Ihre Auswahl noch einmal über ihr Banner oder ihre Datenschutzeinstellungen.",
      ],
      not_found: [
        "Diese Datenschutzeinstellungen sind nicht mehr verfügbar",
        "Die Website erfasst mit diesem Banner keine Auswahl mehr.",
      ],
      rate_limited: [
        "Zu viele Anfragen",
        "Dieser Dienst hat in kurzer Zeit zu viele Anfragen von Ihrer Verbindung erhalten. Warten Sie eine Minute und öffnen Sie diesen Link dann erneut.",
      ],
      other: [
        "Etwas ist schiefgelaufen",
        "Bei diesem Dienst ist ein Fehler aufgetreten, nicht bei Ihnen. Ihre Datenschutzeinstellungen können gerade nicht angezeigt werden. Bitte versuchen Sie es später erneut.",
      ],
    },
    unavailable: [
      "Ihre Datenschutzeinstellungen sind kurzzeitig nicht verfügbar",
      "Dieser Dienst ist kurzzeitig nicht verfügbar. Warten Sie einen Moment und öffnen Sie diesen Link dann erneut.",
    ],
    notSaved: {
      title: "Ihre Auswahl wurde nicht gespeichert",
      because: {
        unsupported_form:
          "Gesendet wurde nicht das Formular der Seite mit den Datenschutzeinstellungen. Ihre Auswahl wird nur gespeichert, wenn dieses Formular direkt von der Seite gesendet wird. Öffnen Sie Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl dort.",
        method_not_allowed:
          "Diese Seite speichert Ihre Auswahl nur über ihr eigenes Formular. Öffnen Sie Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl dort.",
        body_too_large:
          "Die gesendeten Daten waren zu groß für das Formular der Datenschutzeinstellungen. Öffnen Sie Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl dort.",
        invalid_request:
          "Der Inhalt des gesendeten Formulars war ungültig. Öffnen Sie Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl dort.",
        not_from_the_page:
          "Ihre Auswahl wird nur direkt über die Seite mit den Datenschutzeinstellungen gespeichert, damit keine andere Website sie für Sie ändern kann. Öffnen Sie Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl dort.",
        rate_limited:
          "Dieser Dienst hat in kurzer Zeit zu viele Anfragen von Ihrer Verbindung erhalten. Warten Sie eine Minute, öffnen Sie dann Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl erneut.",
        unavailable:
          "Dieser Dienst ist kurzzeitig nicht verfügbar. Warten Sie einen Moment, öffnen Sie dann Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl erneut.",
        other:
          "Bei diesem Dienst ist ein Fehler aufgetreten. Öffnen Sie Ihre Datenschutzeinstellungen und versuchen Sie es später erneut.",
      },
    },
  },
  fr: {
    saved: "Vos choix ont été enregistrés.",
    savedTitle: "Vos choix ont été enregistrés",
    openSettings: "Ouvrir vos paramètres de confidentialité",
    validUntil: (time) => `Ce lien est valable jusqu’à ${time} UTC.`,
    errors: {
      link_expired: [
        "Ce lien a expiré",
        "Les liens permettant de modifier vos choix de confidentialité sont valables 30 minutes après un choix. Rouvrez le site et modifiez vos choix depuis ses paramètres de confidentialité.",
      ],
      link_invalid: [
        "Ce lien n’est pas valide",
        "Il a peut-être été copié de façon incomplète ou modifié. Rouvrez le site et modifiez vos choix depuis ses paramètres de confidentialité.",
      ],
      link_retired: [
        "Ce lien n’est plus valide",
        "Les liens créés avant une mise à jour de sécurité de ce service ne fonctionnent plus. Rouvrez le site et refaites votre choix depuis sa bannière ou ses paramètres de confidentialité.",
      ],
      not_found: [
        "Ces paramètres de confidentialité ne sont plus disponibles",
        "Le site ne recueille plus de choix avec cette bannière.",
      ],
      rate_limited: [
        "Trop de requêtes",
        "Ce service a reçu trop de requêtes de votre connexion en peu de temps. Patientez une minute, puis rouvrez ce lien.",
      ],
      other: [
        "Un problème est survenu",
        "Un problème est survenu du côté de ce service, pas du vôtre. Vos paramètres de confidentialité ne peuvent pas être affichés pour le moment. Veuillez réessayer plus tard.",
      ],
    },
    unavailable: [
      "Vos paramètres de confidentialité sont momentanément indisponibles",
      "Ce service est momentanément indisponible. Patientez un instant, puis rouvrez ce lien.",
    ],
    notSaved: {
      title: "Vos choix n’ont pas été enregistrés",
      because: {
        unsupported_form:
          "Ce qui a été envoyé n’est pas le formulaire de la page des paramètres de confidentialité. Les choix ne sont enregistrés que lorsque ce formulaire est envoyé depuis la page elle-même. Ouvrez vos paramètres de confidentialité et enregistrez-y vos choix.",
        method_not_allowed:
          "Cette page enregistre vos choix uniquement au moyen de son propre formulaire. Ouvrez vos paramètres de confidentialité et enregistrez-y vos choix.",
        body_too_large:
          "Ce qui a été envoyé était trop volumineux pour le formulaire des paramètres de confidentialité. Ouvrez vos paramètres de confidentialité et enregistrez-y vos choix.",
        invalid_request:
          "Le contenu du formulaire envoyé n’était pas valide. Ouvrez vos paramètres de confidentialité et enregistrez-y vos choix.",
        not_from_the_page:
          "Les choix ne sont enregistrés que depuis la page des paramètres de confidentialité elle-même, afin qu’aucun autre site ne puisse les modifier à votre place. Ouvrez vos paramètres de confidentialité et enregistrez-y vos choix.",
        rate_limited:
          "Ce service a reçu trop de requêtes de votre connexion en peu de temps. Patientez une minute, puis ouvrez vos paramètres de confidentialité et enregistrez à nouveau vos choix.",
        unavailable:
          "Ce service est momentanément indisponible. Patientez un instant, puis ouvrez vos paramètres de confidentialité et enregistrez à nouveau vos choix.",
        other:
          "Un problème est survenu du côté de ce service. Ouvrez vos paramètres de confidentialité et réessayez plus tard.",
      },
    },
  },
  es: {
    saved: "Sus opciones se han guardado.",
    savedTitle: "Sus opciones se han guardado",
    openSettings: "Abrir su configuración de privacidad",
    validUntil: (time) => `Este enlace es válido hasta las ${time} UTC.`,
    errors: {
      link_expired: [
        "Este enlace ha caducado",
        "Los enlaces para cambiar sus opciones de privacidad son válidos durante 30 minutos después de elegir. Vuelva a abrir el sitio y cambie sus opciones desde su configuración de privacidad.",
      ],
      link_invalid: [
        "Este enlace no es válido",
        "Puede que se haya copiado de forma incompleta o se haya modificado. Vuelva a abrir el sitio y cambie sus opciones desde su configuración de privacidad.",
      ],
      link_retired: [
        "Este enlace ya no es válido",
        "Los enlaces creados antes de una actualización de seguridad de este servicio ya no funcionan. Vuelva a abrir el sitio y elija de nuevo desde su banner o su configuración de privacidad.",
      ],
      not_found: [
        "Esta configuración de privacidad ya no está disponible",
        "El sitio ya no recoge opciones con este banner.",
      ],
      rate_limited: [
        "Demasiadas solicitudes",
        "Este servicio ha recibido demasiadas solicitudes desde su conexión en poco tiempo. Espere un minuto y vuelva a abrir este enlace.",
      ],
      other: [
        "Algo ha salido mal",
        "Algo ha salido mal por parte de este servicio, no por la suya. Su configuración de privacidad no se puede mostrar en este momento. Vuelva a intentarlo más tarde.",
      ],
    },
    unavailable: [
      "Su configuración de privacidad no está disponible en este momento",
      "Este servicio no está disponible en este momento. Espere un momento y vuelva a abrir este enlace.",
    ],
    notSaved: {
      title: "Sus opciones no se han guardado",
      because: {
        unsupported_form:
          "Lo que se ha enviado no es el formulario de la página de configuración de privacidad. Las opciones solo se guardan cuando ese formulario se envía desde la propia página. Abra su configuración de privacidad y guarde allí sus opciones.",
        method_not_allowed:
          "Esta página guarda sus opciones solo mediante su propio formulario. Abra su configuración de privacidad y guarde allí sus opciones.",
        body_too_large:
          "Lo que se ha enviado era demasiado grande para el formulario de configuración de privacidad. Abra su configuración de privacidad y guarde allí sus opciones.",
        invalid_request:
          "El contenido del formulario enviado no era válido. Abra su configuración de privacidad y guarde allí sus opciones.",
        not_from_the_page:
          "Las opciones solo se guardan desde la propia página de configuración de privacidad, para que ningún otro sitio pueda cambiarlas por usted. Abra su configuración de privacidad y guarde allí sus opciones.",
        rate_limited:
          "Este servicio ha recibido demasiadas solicitudes desde su conexión en poco tiempo. Espere un minuto, abra su configuración de privacidad y vuelva a guardar sus opciones.",
        unavailable:
          "Este servicio no está disponible en este momento. Espere un momento, abra su configuración de privacidad y vuelva a guardar sus opciones.",
        other:
          "Algo ha salido mal por parte de este servicio. Abra su configuración de privacidad y vuelva a intentarlo más tarde.",
      },
    },
  },
  it: {
    saved: "Le tue scelte sono state salvate.",
    savedTitle: "Le tue scelte sono state salvate",
    openSettings: "Apri le tue impostazioni sulla privacy",
    validUntil: (time) => `Questo link è valido fino alle ${time} UTC.`,
    errors: {
      link_expired: [
        "Questo link è scaduto",
        "I link per modificare le tue scelte sulla privacy sono validi per 30 minuti dopo una scelta. Apri di nuovo il sito e modifica le tue scelte dalle sue impostazioni sulla privacy.",
      ],
      link_invalid: [
        "Questo link non è valido",
        "Potrebbe essere stato copiato in modo incompleto o modificato. Apri di nuovo il sito e modifica le tue scelte dalle sue impostazioni sulla privacy.",
      ],
      link_retired: [
        "Questo link non è più valido",
        "I link creati prima di un aggiornamento di sicurezza di questo servizio non funzionano più. Apri di nuovo il sito e rifai la tua scelta dal suo banner o dalle sue impostazioni sulla privacy.",
      ],
      not_found: [
        "Queste impostazioni sulla privacy non sono più disponibili",
        "Il sito non raccoglie più scelte con questo banner.",
      ],
      rate_limited: [
        "Troppe richieste",
        "Questo servizio ha ricevuto troppe richieste dalla tua connessione in poco tempo. Attendi un minuto, poi apri di nuovo questo link.",
      ],
      other: [
        "Si è verificato un problema",
        "Si è verificato un problema da parte di questo servizio, non da parte tua. Le tue impostazioni sulla privacy non possono essere mostrate in questo momento. Riprova più tardi.",
      ],
    },
    unavailable: [
      "Le tue impostazioni sulla privacy sono momentaneamente non disponibili",
      "Questo servizio è momentaneamente non disponibile. Attendi un momento, poi apri di nuovo questo link.",
    ],
    notSaved: {
      title: "Le tue scelte non sono state salvate",
      because: {
        unsupported_form:
          "Ciò che è stato inviato non è il modulo della pagina delle impostazioni sulla privacy. Le scelte vengono salvate solo quando quel modulo viene inviato dalla pagina stessa. Apri le tue impostazioni sulla privacy e salva lì le tue scelte.",
        method_not_allowed:
          "Questa pagina salva le tue scelte solo tramite il proprio modulo. Apri le tue impostazioni sulla privacy e salva lì le tue scelte.",
        body_too_large:
          "Ciò che è stato inviato era troppo grande per il modulo delle impostazioni sulla privacy. Apri le tue impostazioni sulla privacy e salva lì le tue scelte.",
        invalid_request:
          "Il contenuto del modulo inviato non era valido. Apri le tue impostazioni sulla privacy e salva lì le tue scelte.",
        not_from_the_page:
          "Le scelte vengono salvate solo dalla pagina delle impostazioni sulla privacy, in modo che nessun altro sito possa modificarle al posto tuo. Apri le tue impostazioni sulla privacy e salva lì le tue scelte.",
        rate_limited:
          "Questo servizio ha ricevuto troppe richieste dalla tua connessione in poco tempo. Attendi un minuto, poi apri le tue impostazioni sulla privacy e salva di nuovo le tue scelte.",
        unavailable:
          "Questo servizio è momentaneamente non disponibile. Attendi un momento, poi apri le tue impostazioni sulla privacy e salva di nuovo le tue scelte.",
        other:
          "Si è verificato un problema da parte di questo servizio. Apri le tue impostazioni sulla privacy e riprova più tardi.",
      },
    },
  },
  nl: {
    saved: "Je keuzes zijn opgeslagen.",
    savedTitle: "Je keuzes zijn opgeslagen",
    openSettings: "Open je privacyinstellingen",
    validUntil: (time) => `Deze link werkt tot ${time} UTC.`,
    errors: {
      link_expired: [
        "Deze link is verlopen",
        "Links om je privacykeuzes te wijzigen werken 30 minuten na een keuze. Open de site opnieuw en wijzig je keuzes via de privacyinstellingen.",
      ],
      link_invalid: [
        "Deze link is ongeldig",
        "Hij is mogelijk onvolledig gekopieerd of gewijzigd. Open de site opnieuw en wijzig je keuzes via de privacyinstellingen.",
      ],
      link_retired: [
        "Deze link is niet meer geldig",
        "Links die vóór een beveiligingsupdate van deze dienst zijn gemaakt, werken niet meer. Open de site opnieuw en maak je keuze opnieuw via de banner of de privacyinstellingen.",
      ],
      not_found: [
        "Deze privacyinstellingen zijn niet meer beschikbaar",
        "De site verzamelt met deze banner geen keuzes meer.",
      ],
      rate_limited: [
        "Te veel verzoeken",
        "Deze dienst heeft in korte tijd te veel verzoeken van je verbinding ontvangen. Wacht een minuut en open deze link dan opnieuw.",
      ],
      other: [
        "Er is iets misgegaan",
        "Er is aan de kant van deze dienst iets misgegaan, niet aan jouw kant. Je privacyinstellingen kunnen nu niet worden getoond. Probeer het later opnieuw.",
      ],
    },
    unavailable: [
      "Je privacyinstellingen zijn even niet beschikbaar",
      "Deze dienst is even niet beschikbaar. Wacht een moment en open deze link dan opnieuw.",
    ],
    notSaved: {
      title: "Je keuzes zijn niet opgeslagen",
      because: {
        unsupported_form:
          "Wat is verzonden, is niet het formulier van de pagina met privacyinstellingen. Keuzes worden alleen opgeslagen als dat formulier vanaf de pagina zelf wordt verzonden. Open je privacyinstellingen en sla je keuzes daar op.",
        method_not_allowed:
          "Deze pagina slaat je keuzes alleen op via het eigen formulier. Open je privacyinstellingen en sla je keuzes daar op.",
        body_too_large:
          "Wat is verzonden, was te groot voor het formulier van de privacyinstellingen. Open je privacyinstellingen en sla je keuzes daar op.",
        invalid_request:
          "De inhoud van het verzonden formulier was ongeldig. Open je privacyinstellingen en sla je keuzes daar op.",
        not_from_the_page:
          "Keuzes worden alleen opgeslagen vanaf de pagina met privacyinstellingen zelf, zodat geen andere website ze voor je kan wijzigen. Open je privacyinstellingen en sla je keuzes daar op.",
        rate_limited:
          "Deze dienst heeft in korte tijd te veel verzoeken van je verbinding ontvangen. Wacht een minuut, open dan je privacyinstellingen en sla je keuzes opnieuw op.",
        unavailable:
          "Deze dienst is even niet beschikbaar. Wacht een moment, open dan je privacyinstellingen en sla je keuzes opnieuw op.",
        other:
          "Er is aan de kant van deze dienst iets misgegaan. Open je privacyinstellingen en probeer het later opnieuw.",
      },
    },
  },
  pt: {
    saved: "As suas escolhas foram guardadas.",
    savedTitle: "As suas escolhas foram guardadas",
    openSettings: "Abrir as suas definições de privacidade",
    validUntil: (time) => `Este link é válido até às ${time} UTC.`,
    errors: {
      link_expired: [
        "Este link expirou",
        "Os links para alterar as suas escolhas de privacidade são válidos durante 30 minutos após uma escolha. Abra novamente o site e altere as suas escolhas nas definições de privacidade.",
      ],
      link_invalid: [
        "Este link não é válido",
        "Pode ter sido copiado de forma incompleta ou alterado. Abra novamente o site e altere as suas escolhas nas definições de privacidade.",
      ],
      link_retired: [
        "Este link já não é válido",
        "Os links criados antes de uma atualização de segurança deste serviço já não funcionam. Abra novamente o site e faça novamente a sua escolha no banner ou nas definições de privacidade.",
      ],
      not_found: [
        "Estas definições de privacidade já não estão disponíveis",
        "O site já não recolhe escolhas com este banner.",
      ],
      rate_limited: [
        "Demasiados pedidos",
        "Este serviço recebeu demasiados pedidos da sua ligação num curto espaço de tempo. Aguarde um minuto e abra novamente este link.",
      ],
      other: [
        "Ocorreu um problema",
        "Ocorreu um problema do lado deste serviço, não do seu. Não é possível mostrar as suas definições de privacidade neste momento. Tente novamente mais tarde.",
      ],
    },
    unavailable: [
      "As suas definições de privacidade estão momentaneamente indisponíveis",
      "Este serviço está momentaneamente indisponível. Aguarde um momento e abra novamente este link.",
    ],
    notSaved: {
      title: "As suas escolhas não foram guardadas",
      because: {
        unsupported_form:
          "O que foi enviado não é o formulário da página de definições de privacidade. As escolhas só são guardadas quando esse formulário é enviado a partir da própria página. Abra as suas definições de privacidade e guarde lá as suas escolhas.",
        method_not_allowed:
          "Esta página só guarda as suas escolhas através do seu próprio formulário. Abra as suas definições de privacidade e guarde lá as suas escolhas.",
        body_too_large:
          "O que foi enviado era demasiado grande para o formulário das definições de privacidade. Abra as suas definições de privacidade e guarde lá as suas escolhas.",
        invalid_request:
          "O conteúdo do formulário enviado não era válido. Abra as suas definições de privacidade e guarde lá as suas escolhas.",
        not_from_the_page:
          "As escolhas só são guardadas a partir da própria página de definições de privacidade, para que nenhum outro site as possa alterar por si. Abra as suas definições de privacidade e guarde lá as suas escolhas.",
        rate_limited:
          "Este serviço recebeu demasiados pedidos da sua ligação num curto espaço de tempo. Aguarde um minuto, abra as suas definições de privacidade e guarde novamente as suas escolhas.",
        unavailable:
          "Este serviço está momentaneamente indisponível. Aguarde um momento, abra as suas definições de privacidade e guarde novamente as suas escolhas.",
        other:
          "Ocorreu um problema do lado deste serviço. Abra as suas definições de privacidade e tente novamente mais tarde.",
      },
    },
  },
  pl: {
    saved: "Twoje wybory zostały zapisane.",
    savedTitle: "Twoje wybory zostały zapisane",
    openSettings: "Otwórz ustawienia prywatności",
    validUntil: (time) => `Ten link działa do ${time} UTC.`,
    errors: {
      link_expired: [
        "Ten link wygasł",
        "Linki do zmiany wyborów dotyczących prywatności działają przez 30 minut od dokonania wyboru. Otwórz ponownie witrynę i zmień wybory w jej ustawieniach prywatności.",
      ],
      link_invalid: [
        "Ten link jest nieprawidłowy",
        "Mógł zostać skopiowany niekompletnie lub zmieniony. Otwórz ponownie witrynę i zmień wybory w jej ustawieniach prywatności.",
      ],
      link_retired: [
        "Ten link nie jest już ważny",
        "Linki utworzone przed aktualizacją zabezpieczeń tej usługi już nie działają. Otwórz ponownie witrynę i dokonaj wyboru jeszcze raz za pomocą jej banera lub ustawień prywatności.",
      ],
      not_found: [
        "Te ustawienia prywatności nie są już dostępne",
        "Witryna nie zbiera już wyborów za pomocą tego banera.",
      ],
      rate_limited: [
        "Zbyt wiele żądań",
        "Ta usługa otrzymała w krótkim czasie zbyt wiele żądań z Twojego połączenia. Odczekaj minutę, a następnie ponownie otwórz ten link.",
      ],
      other: [
        "Coś poszło nie tak",
        "Po stronie tej usługi coś poszło nie tak, nie po Twojej. Nie można teraz wyświetlić Twoich ustawień prywatności. Spróbuj ponownie później.",
      ],
    },
    unavailable: [
      "Twoje ustawienia prywatności są chwilowo niedostępne",
      "Ta usługa jest chwilowo niedostępna. Odczekaj chwilę, a następnie ponownie otwórz ten link.",
    ],
    notSaved: {
      title: "Twoje wybory nie zostały zapisane",
      because: {
        unsupported_form:
          "Wysłane dane nie pochodzą z formularza strony ustawień prywatności. Wybory są zapisywane tylko wtedy, gdy ten formularz zostanie wysłany z samej strony. Otwórz ustawienia prywatności i zapisz tam swoje wybory.",
        method_not_allowed:
          "Ta strona zapisuje wybory tylko za pomocą własnego formularza. Otwórz ustawienia prywatności i zapisz tam swoje wybory.",
        body_too_large:
          "Wysłane dane były zbyt duże dla formularza ustawień prywatności. Otwórz ustawienia prywatności i zapisz tam swoje wybory.",
        invalid_request:
          "Zawartość wysłanego formularza była nieprawidłowa. Otwórz ustawienia prywatności i zapisz tam swoje wybory.",
        not_from_the_page:
          "Wybory są zapisywane tylko z samej strony ustawień prywatności, aby żadna inna witryna nie mogła ich zmienić za Ciebie. Otwórz ustawienia prywatności i zapisz tam swoje wybory.",
        rate_limited:
          "Ta usługa otrzymała w krótkim czasie zbyt wiele żądań z Twojego połączenia. Odczekaj minutę, a następnie otwórz ustawienia prywatności i zapisz wybory ponownie.",
        unavailable:
          "Ta usługa jest chwilowo niedostępna. Odczekaj chwilę, a następnie otwórz ustawienia prywatności i zapisz wybory ponownie.",
        other:
          "Po stronie tej usługi coś poszło nie tak. Otwórz ustawienia prywatności i spróbuj ponownie później.",
      },
    },
  },
  sv: {
    saved: "Dina val har sparats.",
    savedTitle: "Dina val har sparats",
    openSettings: "Öppna dina integritetsinställningar",
    validUntil: (time) => `Den här länken fungerar till ${time} UTC.`,
    errors: {
      link_expired: [
        "Länken har gått ut",
        "Länkar för att ändra dina integritetsval fungerar i 30 minuter efter ett val. Öppna webbplatsen igen och ändra dina val i dess integritetsinställningar.",
      ],
      link_invalid: [
        "Länken är ogiltig",
        "Den kan ha kopierats ofullständigt eller ändrats. Öppna webbplatsen igen och ändra dina val i dess integritetsinställningar.",
      ],
      link_retired: [
        "Länken gäller inte längre",
        "Länkar som skapades före en säkerhetsuppdatering av tjänsten fungerar inte längre. Öppna webbplatsen igen och gör ditt val på nytt i dess banner eller integritetsinställningar.",
      ],
      not_found: [
        "De här integritetsinställningarna är inte längre tillgängliga",
        "Webbplatsen samlar inte längre in val med den här bannern.",
      ],
      rate_limited: [
        "För många förfrågningar",
        "Tjänsten har fått för många förfrågningar från din anslutning på kort tid. Vänta en minut och öppna sedan länken igen.",
      ],
      other: [
        "Något gick fel",
        "Något gick fel hos tjänsten, inte hos dig. Dina integritetsinställningar kan inte visas just nu. Försök igen senare.",
      ],
    },
    unavailable: [
      "Dina integritetsinställningar är tillfälligt otillgängliga",
      "Tjänsten är tillfälligt otillgänglig. Vänta en stund och öppna sedan länken igen.",
    ],
    notSaved: {
      title: "Dina val sparades inte",
      because: {
        unsupported_form:
          "Det som skickades var inte formuläret på sidan med integritetsinställningar. Val sparas bara när det formuläret skickas från själva sidan. Öppna dina integritetsinställningar och spara dina val där.",
        method_not_allowed:
          "Den här sidan sparar dina val bara via sitt eget formulär. Öppna dina integritetsinställningar och spara dina val där.",
        body_too_large:
          "Det som skickades var för stort för formuläret med integritetsinställningar. Öppna dina integritetsinställningar och spara dina val där.",
        invalid_request:
          "Innehållet i formuläret som skickades var ogiltigt. Öppna dina integritetsinställningar och spara dina val där.",
        not_from_the_page:
          "Val sparas bara från själva sidan med integritetsinställningar, så att ingen annan webbplats kan ändra dem åt dig. Öppna dina integritetsinställningar och spara dina val där.",
        rate_limited:
          "Tjänsten har fått för många förfrågningar från din anslutning på kort tid. Vänta en minut, öppna sedan dina integritetsinställningar och spara dina val igen.",
        unavailable:
          "Tjänsten är tillfälligt otillgänglig. Vänta en stund, öppna sedan dina integritetsinställningar och spara dina val igen.",
        other:
          "Något gick fel hos tjänsten. Öppna dina integritetsinställningar och försök igen senare.",
      },
    },
  },
  da: {
    saved: "Dine valg er gemt.",
    savedTitle: "Dine valg er gemt",
    openSettings: "Åbn dine privatlivsindstillinger",
    validUntil: (time) => `Dette link virker indtil kl. ${time} UTC.`,
    errors: {
      link_expired: [
        "Dette link er udløbet",
        "Links til at ændre dine privatlivsvalg virker i 30 minutter efter et valg. Åbn webstedet igen, og ændr dine valg i dets privatlivsindstillinger.",
      ],
      link_invalid: [
        "Dette link er ugyldigt",
        "Det er måske kopieret ufuldstændigt eller ændret. Åbn webstedet igen, og ændr dine valg i dets privatlivsindstillinger.",
      ],
      link_retired: [
        "Dette link er ikke længere gyldigt",
        "Links, der blev oprettet før en sikkerhedsopdatering af tjenesten, virker ikke længere. Åbn webstedet igen, og foretag dit valg igen via dets banner eller privatlivsindstillinger.",
      ],
      not_found: [
        "Disse privatlivsindstillinger er ikke længere tilgængelige",
        "Webstedet indsamler ikke længere valg med dette banner.",
      ],
      rate_limited: [
        "For mange forespørgsler",
        "Tjenesten har modtaget for mange forespørgsler fra din forbindelse på kort tid. Vent et minut, og åbn derefter linket igen.",
      ],
      other: [
        "Noget gik galt",
        "Der gik noget galt hos tjenesten, ikke hos dig. Dine privatlivsindstillinger kan ikke vises lige nu. Prøv igen senere.",
      ],
    },
    unavailable: [
      "Dine privatlivsindstillinger er midlertidigt utilgængelige",
      "Tjenesten er midlertidigt utilgængelig. Vent et øjeblik, og åbn derefter linket igen.",
    ],
    notSaved: {
      title: "Dine valg blev ikke gemt",
      because: {
        unsupported_form:
          "Det, der blev sendt, var ikke formularen på siden med privatlivsindstillinger. Valg gemmes kun, når den formular sendes fra selve siden. Åbn dine privatlivsindstillinger, og gem dine valg der.",
        method_not_allowed:
          "Denne side gemmer kun dine valg via sin egen formular. Åbn dine privatlivsindstillinger, og gem dine valg der.",
        body_too_large:
          "Det, der blev sendt, var for stort til formularen med privatlivsindstillinger. Åbn dine privatlivsindstillinger, og gem dine valg der.",
        invalid_request:
          "Indholdet af den sendte formular var ugyldigt. Åbn dine privatlivsindstillinger, og gem dine valg der.",
        not_from_the_page:
          "Valg gemmes kun fra selve siden med privatlivsindstillinger, så intet andet websted kan ændre dem for dig. Åbn dine privatlivsindstillinger, og gem dine valg der.",
        rate_limited:
          "Tjenesten har modtaget for mange forespørgsler fra din forbindelse på kort tid. Vent et minut, åbn derefter dine privatlivsindstillinger, og gem dine valg igen.",
        unavailable:
          "Tjenesten er midlertidigt utilgængelig. Vent et øjeblik, åbn derefter dine privatlivsindstillinger, og gem dine valg igen.",
        other:
          "Der gik noget galt hos tjenesten. Åbn dine privatlivsindstillinger, og prøv igen senere.",
      },
    },
  },
  fi: {
    saved: "Valintasi on tallennettu.",
    savedTitle: "Valintasi on tallennettu",
    openSettings: "Avaa tietosuoja-asetuksesi",
    validUntil: (time) => `Tämä linkki toimii klo ${time} UTC asti.`,
    errors: {
      link_expired: [
        "Tämä linkki on vanhentunut",
        "Linkit tietosuojavalintojen muuttamiseen toimivat 30 minuuttia valinnan jälkeen. Avaa sivusto uudelleen ja muuta valintojasi sen tietosuoja-asetuksista.",
      ],
      link_invalid: [
        "Tämä linkki ei ole kelvollinen",
        "Se on ehkä kopioitu puutteellisesti tai sitä on muutettu. Avaa sivusto uudelleen ja muuta valintojasi sen tietosuoja-asetuksista.",
      ],
      link_retired: [
        "Tämä linkki ei ole enää voimassa",
        "Ennen palvelun tietoturvapäivitystä luodut linkit eivät enää toimi. Avaa sivusto uudelleen ja tee valintasi uudelleen sen bannerista tai tietosuoja-asetuksista.",
      ],
      not_found: [
        "Nämä tietosuoja-asetukset eivät ole enää käytettävissä",
        "Sivusto ei enää kerää valintoja tällä bannerilla.",
      ],
      rate_limited: [
        "Liian monta pyyntöä",
        "Palvelu sai yhteydestäsi liian monta pyyntöä lyhyessä ajassa. Odota minuutti ja avaa sitten tämä linkki uudelleen.",
      ],
      other: [
        "Jokin meni vikaan",
        "Palvelussa tapahtui virhe, joka ei johtunut sinusta. Tietosuoja-asetuksiasi ei voida näyttää juuri nyt. Yritä myöhemmin uudelleen.",
      ],
    },
    unavailable: [
      "Tietosuoja-asetuksesi eivät ole juuri nyt käytettävissä",
      "Palvelu ei ole juuri nyt käytettävissä. Odota hetki ja avaa sitten tämä linkki uudelleen.",
    ],
    notSaved: {
      title: "Valintojasi ei tallennettu",
      because: {
        unsupported_form:
          "Lähetetty pyyntö ei ollut tietosuoja-asetussivun lomake. Valinnat tallennetaan vain, kun lomake lähetetään itse sivulta. Avaa tietosuoja-asetuksesi ja tallenna valintasi siellä.",
        method_not_allowed:
          "Tämä sivu tallentaa valintasi vain oman lomakkeensa kautta. Avaa tietosuoja-asetuksesi ja tallenna valintasi siellä.",
        body_too_large:
          "Lähetetty pyyntö oli liian suuri tietosuoja-asetusten lomakkeelle. Avaa tietosuoja-asetuksesi ja tallenna valintasi siellä.",
        invalid_request:
          "Lähetetyn lomakkeen sisältö ei ollut kelvollinen. Avaa tietosuoja-asetuksesi ja tallenna valintasi siellä.",
        not_from_the_page:
          "Valinnat tallennetaan vain itse tietosuoja-asetussivulta, jotta mikään muu sivusto ei voi muuttaa niitä puolestasi. Avaa tietosuoja-asetuksesi ja tallenna valintasi siellä.",
        rate_limited:
          "Palvelu sai yhteydestäsi liian monta pyyntöä lyhyessä ajassa. Odota minuutti, avaa sitten tietosuoja-asetuksesi ja tallenna valintasi uudelleen.",
        unavailable:
          "Palvelu ei ole juuri nyt käytettävissä. Odota hetki, avaa sitten tietosuoja-asetuksesi ja tallenna valintasi uudelleen.",
        other:
          "Palvelussa tapahtui virhe. Avaa tietosuoja-asetuksesi ja yritä myöhemmin uudelleen.",
      },
    },
  },
};

/** The languages the page's own sentences exist in, English first. */
export const PAGE_LANGUAGES = Object.keys(PAGE_TEXTS);

/**
 * The page's sentences for a language tag ("de-AT" → "de"); English for a language the page does
 * not ship, so a page is never in two languages but those of the operator's texts.
 */
export function pageTexts(languageCode: string): {
  lang: string;
  texts: PageTexts;
  /** Whether these are English standing in for a language the page does not ship. */
  fellBack: boolean;
} {
  const primary = languageCode.toLowerCase().split("-")[0] ?? "";
  const texts = PAGE_TEXTS[primary];
  return texts
    ? { lang: primary, texts, fellBack: false }
    : { lang: "en", texts: PAGE_TEXTS.en as PageTexts, fellBack: true };
}

/** The language of an error page: the browser's best Accept-Language match, else English. */
export function browserLanguage(headers: Record<string, string | string[] | undefined>): string {
  // Negotiator matches "de-CH" to "de" and honours q-values; "*" and no header give English.
  return new Negotiator({ headers }).language(PAGE_LANGUAGES) ?? "en";
}
