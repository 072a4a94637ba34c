import Negotiator from "negotiator";

/** The page's own sentences: the operator configures every other string (decisions §3 texts). */
export interface PageTexts {
  saved: string;
  /** The link back to the settings page, on the page of a submission that was not saved. */
  openSettings: string;
  /**
   * The text of a save the service could not make (unavailable, or failing), under the title of
   * `unsupported_form`: the visitor learns the choice was not saved, not only that the settings
   * could not be shown.
   */
  notSaved: string;
  /** The link's last minute, as "HH:MM" in UTC. */
  validUntil(time: string): string;
  /** Title and text of the page for each failure code; `other` for any code not listed. */
  errors: Record<ErrorCode | "other", [title: string, text: string]>;
}

export type ErrorCode =
  | "link_expired"
  | "link_invalid"
  | "not_found"
  | "rate_limited"
  | "unsupported_form";

/**
 * The sentences in each language the page ships, English first (the fallback). A choice made in
 * one of these languages gets its page wholly in it when the banner has texts for that language;
 * an error page, which has no banner, follows the browser's Accept-Language.
 */
const PAGE_TEXTS: Record<string, PageTexts> = {
  en: {
    saved: "Your choices have been saved.",
    openSettings: "Open your privacy settings",
    notSaved: "Your choices could not be saved just now. Please try again later.",
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
      not_found: [
        "These privacy settings are no longer available",
        "The site no longer collects choices with this banner.",
      ],
      rate_limited: ["Too many requests", "Please wait a minute and try again."],
      unsupported_form: [
        "Your choices were not saved",
        "Open the link again and save your choices with the form on its page.",
      ],
      other: [
        "Something went wrong",
        "Your privacy settings could not be shown just now. Please try again later.",
      ],
    },
  },
  de: {
    saved: "Ihre Auswahl wurde gespeichert.",
    openSettings: "Ihre Datenschutzeinstellungen öffnen",
    notSaved:
      "Ihre Auswahl konnte gerade nicht gespeichert werden. Bitte versuchen Sie es später erneut.",
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
      not_found: [
        "Diese Datenschutzeinstellungen sind nicht mehr verfügbar",
        "Die Website erfasst mit diesem Banner keine Auswahl mehr.",
      ],
      rate_limited: [
        "Zu viele Anfragen",
        "Bitte warten Sie eine Minute und versuchen Sie es erneut.",
      ],
      unsupported_form: [
        "Ihre Auswahl wurde nicht gespeichert",
        "Öffnen Sie den Link erneut und speichern Sie Ihre Auswahl mit dem Formular auf der Seite.",
      ],
      other: [
        "Etwas ist schiefgelaufen",
        "Ihre Datenschutzeinstellungen können gerade nicht angezeigt werden. Bitte versuchen Sie es später erneut.",
      ],
    },
  },
  fr: {
    saved: "Vos choix ont été enregistrés.",
    openSettings: "Ouvrir vos paramètres de confidentialité",
    notSaved:
      "Vos choix n’ont pas pu être enregistrés pour le moment. Veuillez réessayer plus tard.",
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
      not_found: [
        "Ces paramètres de confidentialité ne sont plus disponibles",
        "Le site ne recueille plus de choix avec cette bannière.",
      ],
      rate_limited: ["Trop de requêtes", "Veuillez patienter une minute et réessayer."],
      unsupported_form: [
        "Vos choix n’ont pas été enregistrés",
        "Rouvrez le lien et enregistrez vos choix avec le formulaire de sa page.",
      ],
      other: [
        "Un problème est survenu",
        "Vos paramètres de confidentialité ne peuvent pas être affichés pour le moment. Veuillez réessayer plus tard.",
      ],
    },
  },
  es: {
    saved: "Sus opciones se han guardado.",
    openSettings: "Abrir su configuración de privacidad",
    notSaved:
      "Sus opciones no se han podido guardar en este momento. Vuelva a intentarlo más tarde.",
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
      not_found: [
        "Esta configuración de privacidad ya no está disponible",
        "El sitio ya no recoge opciones con este banner.",
      ],
      rate_limited: ["Demasiadas solicitudes", "Espere un minuto y vuelva a intentarlo."],
      unsupported_form: [
        "Sus opciones no se han guardado",
        "Vuelva a abrir el enlace y guarde sus opciones con el formulario de su página.",
      ],
      other: [
        "Algo ha salido mal",
        "Su configuración de privacidad no se puede mostrar en este momento. Vuelva a intentarlo más tarde.",
      ],
    },
  },
  it: {
    saved: "Le tue scelte sono state salvate.",
    openSettings: "Apri le tue impostazioni sulla privacy",
    notSaved: "Non è stato possibile salvare le tue scelte in questo momento. Riprova più tardi.",
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
      not_found: [
        "Queste impostazioni sulla privacy non sono più disponibili",
        "Il sito non raccoglie più scelte con questo banner.",
      ],
      rate_limited: ["Troppe richieste", "Attendi un minuto e riprova."],
      unsupported_form: [
        "Le tue scelte non sono state salvate",
        "Apri di nuovo il link e salva le tue scelte con il modulo della sua pagina.",
      ],
      other: [
        "Si è verificato un problema",
        "Le tue impostazioni sulla privacy non possono essere mostrate in questo momento. Riprova più tardi.",
      ],
    },
  },
  nl: {
    saved: "Je keuzes zijn opgeslagen.",
    openSettings: "Open je privacyinstellingen",
    notSaved: "Je keuzes konden nu niet worden opgeslagen. Probeer het later opnieuw.",
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
      not_found: [
        "Deze privacyinstellingen zijn niet meer beschikbaar",
        "De site verzamelt met deze banner geen keuzes meer.",
      ],
      rate_limited: ["Te veel verzoeken", "Wacht een minuut en probeer het opnieuw."],
      unsupported_form: [
        "Je keuzes zijn niet opgeslagen",
        "Open de link opnieuw en sla je keuzes op met het formulier op de pagina.",
      ],
      other: [
        "Er is iets misgegaan",
        "Je privacyinstellingen kunnen nu niet worden getoond. Probeer het later opnieuw.",
      ],
    },
  },
  pt: {
    saved: "As suas escolhas foram guardadas.",
    openSettings: "Abrir as suas definições de privacidade",
    notSaved:
      "Não foi possível guardar as suas escolhas neste momento. Tente novamente mais tarde.",
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
      not_found: [
        "Estas definições de privacidade já não estão disponíveis",
        "O site já não recolhe escolhas com este banner.",
      ],
      rate_limited: ["Demasiados pedidos", "Aguarde um minuto e tente novamente."],
      unsupported_form: [
        "As suas escolhas não foram guardadas",
        "Abra novamente o link e guarde as suas escolhas com o formulário da página.",
      ],
      other: [
        "Ocorreu um problema",
        "Não é possível mostrar as suas definições de privacidade neste momento. Tente novamente mais tarde.",
      ],
    },
  },
  pl: {
    saved: "Twoje wybory zostały zapisane.",
    openSettings: "Otwórz ustawienia prywatności",
    notSaved: "Nie udało się teraz zapisać Twoich wyborów. Spróbuj ponownie później.",
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
      not_found: [
        "Te ustawienia prywatności nie są już dostępne",
        "Witryna nie zbiera już wyborów za pomocą tego banera.",
      ],
      rate_limited: ["Zbyt wiele żądań", "Odczekaj minutę i spróbuj ponownie."],
      unsupported_form: [
        "Twoje wybory nie zostały zapisane",
        "Otwórz link ponownie i zapisz wybory za pomocą formularza na jego stronie.",
      ],
      other: [
        "Coś poszło nie tak",
        "Nie można teraz wyświetlić Twoich ustawień prywatności. Spróbuj ponownie później.",
      ],
    },
  },
  sv: {
    saved: "Dina val har sparats.",
    openSettings: "Öppna dina integritetsinställningar",
    notSaved: "Dina val kunde inte sparas just nu. Försök igen senare.",
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
      not_found: [
        "De här integritetsinställningarna är inte längre tillgängliga",
        "Webbplatsen samlar inte längre in val med den här bannern.",
      ],
      rate_limited: ["För många förfrågningar", "Vänta en minut och försök igen."],
      unsupported_form: [
        "Dina val sparades inte",
        "Öppna länken igen och spara dina val med formuläret på sidan.",
      ],
      other: [
        "Något gick fel",
        "Dina integritetsinställningar kan inte visas just nu. Försök igen senare.",
      ],
    },
  },
  da: {
    saved: "Dine valg er gemt.",
    openSettings: "Åbn dine privatlivsindstillinger",
    notSaved: "Dine valg kunne ikke gemmes lige nu. Prøv igen senere.",
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
      not_found: [
        "Disse privatlivsindstillinger er ikke længere tilgængelige",
        "Webstedet indsamler ikke længere valg med dette banner.",
      ],
      rate_limited: ["For mange forespørgsler", "Vent et minut, og prøv igen."],
      unsupported_form: [
        "Dine valg blev ikke gemt",
        "Åbn linket igen, og gem dine valg med formularen på siden.",
      ],
      other: [
        "Noget gik galt",
        "Dine privatlivsindstillinger kan ikke vises lige nu. Prøv igen senere.",
      ],
    },
  },
  fi: {
    saved: "Valintasi on tallennettu.",
    openSettings: "Avaa tietosuoja-asetuksesi",
    notSaved: "Valintojasi ei voitu tallentaa juuri nyt. Yritä myöhemmin uudelleen.",
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
      not_found: [
        "Nämä tietosuoja-asetukset eivät ole enää käytettävissä",
        "Sivusto ei enää kerää valintoja tällä bannerilla.",
      ],
      rate_limited: ["Liian monta pyyntöä", "Odota minuutti ja yritä uudelleen."],
      unsupported_form: [
        "Valintojasi ei tallennettu",
        "Avaa linkki uudelleen ja tallenna valintasi sivun lomakkeella.",
      ],
      other: [
        "Jokin meni vikaan",
        "Tietosuoja-asetuksiasi ei voida näyttää juuri nyt. Yritä myöhemmin uudelleen.",
      ],
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
